/**
 * Reading back a record vmsnap wrote as JSON (a journal entry, a freeze obligation): a record
 * that is not an object, or whose fields are not what was written, is never acted on — a torn or
 * planted one could otherwise thaw a freeze that is not vmsnap's.
 */
export interface JsonFields {
  o: Record<string, unknown>;
  /** A non-empty string. */
  str(k: string): boolean;
  /** A finite number. */
  num(k: string): boolean;
}

export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function jsonFields(text: string): JsonFields | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!v || typeof v !== 'object' || Array.isArray(v)) return undefined;
  const o = v as Record<string, unknown>;
  return {
    o,
    str: (k) => typeof o[k] === 'string' && (o[k] as string).length > 0,
    num: (k) => typeof o[k] === 'number' && Number.isFinite(o[k]),
  };
}
