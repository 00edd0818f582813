import { existsSync } from 'node:fs';
import path from 'node:path';

/** Entry of the workflow bundle, whether we run from sources (tsx, vitest) or compiled output. */
export function workflowsPath(): string {
  const ts = path.resolve(__dirname, '../../workflows/index.ts');
  return existsSync(ts) ? ts : path.resolve(__dirname, '../../workflows/index.js');
}
