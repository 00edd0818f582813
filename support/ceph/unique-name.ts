import { randomUUID } from 'node:crypto';

/** A UUID-suffixed name, so every test's pools, images and namespaces are its own. */
export function uniqueName(prefix = 't'): string {
  return `${prefix}-${randomUUID()}`;
}
