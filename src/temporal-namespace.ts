/*
 * How the server says a search attribute is not registered. The SQL visibility store (dev server,
 * 1.2x) answers "Namespace N has no mapping defined for search attribute X" on start/schedule and
 * "column name 'X' is not a valid search attribute" in a list query; Elasticsearch-backed servers
 * answer "search attribute X is not defined" / "invalid search attribute". Only vmsnap's names
 * count: a user's own attribute in a query is not ours to explain.
 */
const NOT_REGISTERED = /no mapping defined for search attribute|is not a valid search attribute|search attribute \S+ is not defined|unknown search attribute|invalid search attribute/i;

/** vmsnap's search attributes an error says are missing, or undefined when it says nothing of the kind. */
export function missingSearchAttributesIn(err: unknown): string[] | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    // A gRPC ServiceError keeps the server's text in `details`; the SDK wraps it with its own message.
    const text = `${e.message} ${(e as { details?: unknown }).details ?? ''}`;
    if (!NOT_REGISTERED.test(text)) continue;
    // By name pattern, not from model/search-attributes: main.ts reads this and must not load the SDK.
    const names = [...new Set(text.match(/\bVmsnap[A-Z][A-Za-z]*\b/g) ?? [])];
    if (names.length) return names;
  }
  return undefined;
}

/**
 * The namespace lacks search attributes vmsnap writes: every start, schedule and list query that
 * names one fails on the server. Its message is the one line the CLI prints (exit 4).
 */
export class NamespaceNotPreparedError extends Error {
  override name = 'NamespaceNotPreparedError';
  constructor(
    readonly namespace: string | undefined,
    readonly missing: string[],
  ) {
    const ns = namespace === undefined ? 'namespace' : `namespace "${namespace}"`;
    super(`Temporal ${ns} is not prepared for vmsnap (search attribute${missing.length > 1 ? 's' : ''} ${missing.join(', ')} not registered): run \`vmsnap setup\``);
  }
}

