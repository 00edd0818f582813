/*
 * The namespace the command's Temporal client uses, for the message that names it when the server
 * refuses a search attribute (main.ts). Kept apart from temporal-client.ts so main.ts, which
 * must not load the Temporal SDK for `vmsnap thaw`, can read it.
 */
let dialed: string | undefined;

export function recordNamespace(namespace: string): void {
  dialed = namespace;
}

export function namespaceDialed(): string | undefined {
  return dialed;
}
