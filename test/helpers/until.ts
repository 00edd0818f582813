/**
 * Polls `probe` (its errors count as "not yet") until it returns something other than undefined or
 * false, and returns that; throws naming `what` after `ms`.
 */
export async function until<T>(what: string, probe: () => Promise<T | undefined | false>, ms: number, everyMs = 200): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await probe().catch(() => undefined);
    if (v !== undefined && v !== false) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
