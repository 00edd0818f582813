import type { Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { SEARCH_ATTRIBUTE_TYPES } from './model/search-attributes';
import { NamespaceNotPreparedError } from './temporal-namespace';

const IndexedValueType = temporal.api.enums.v1.IndexedValueType;
const WANTED: Record<string, temporal.api.enums.v1.IndexedValueType> = Object.fromEntries(
  Object.entries(SEARCH_ATTRIBUTE_TYPES).map(([name, t]) => [
    name,
    t === 'Bool' ? IndexedValueType.INDEXED_VALUE_TYPE_BOOL : t === 'KeywordList' ? IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST : IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
  ]),
);

/** What a namespace has of vmsnap's search attributes, after an optional registration. */
export interface SearchAttributeState {
  /** Registered with the right type before this call. */
  present: string[];
  /** Registered by this call. */
  added: string[];
  /** Still absent. */
  missing: string[];
  /** Registered with another type: vmsnap cannot fix that (removing one loses its values). */
  wrongType: string[];
}

/**
 * Lists vmsnap's search attributes on `namespace` (operator ListSearchAttributes) and, with
 * `register`, adds the missing ones (operator AddSearchAttributes). Adding only what is missing
 * makes it idempotent: a second call adds nothing and changes nothing.
 */
export async function prepareSearchAttributes(conn: Connection, namespace: string, register: boolean): Promise<SearchAttributeState> {
  const list = async () => (await conn.operatorService.listSearchAttributes({ namespace })).customAttributes ?? {};
  const before = await list();
  const wrongType = Object.keys(WANTED).filter((k) => before[k] !== undefined && before[k] !== WANTED[k]);
  const present = Object.keys(WANTED).filter((k) => before[k] === WANTED[k]);
  const absent = Object.keys(WANTED).filter((k) => before[k] === undefined);
  if (!register || !absent.length) return { present, added: [], missing: absent, wrongType };
  await conn.operatorService.addSearchAttributes({ namespace, searchAttributes: Object.fromEntries(absent.map((k) => [k, WANTED[k]])) });
  // Read back: a server may accept the call and still not have the attribute (a full mapping).
  const after = await list();
  return { present, added: absent.filter((k) => after[k] !== undefined), missing: absent.filter((k) => after[k] === undefined), wrongType };
}

/** The `temporal` CLI command that registers `names`, for an operator who prefers it. */
export function temporalCliFor(names: string[], namespace: string): string {
  return names.map((k) => `temporal operator search-attribute create --namespace ${namespace} --name ${k} --type ${SEARCH_ATTRIBUTE_TYPES[k]}`).join('; ');
}

/** Throws {@link NamespaceNotPreparedError} when the namespace lacks any of vmsnap's search attributes. */
export async function requirePreparedNamespace(conn: Connection, namespace: string): Promise<void> {
  const s = await prepareSearchAttributes(conn, namespace, false);
  if (s.missing.length) throw new NamespaceNotPreparedError(namespace, s.missing);
}
