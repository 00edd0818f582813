import { createRequire } from 'node:module';
import path from 'node:path';

/**
 * How to run one of vmsnap's own modules as a separate Node process: compiled `.js` directly,
 * TypeScript sources (tests, an edited checkout) through tsx's require hook.
 */
export function nodeEntry(dir: string, base: string, selfFile: string): { file: string; execArgv: string[] } {
  const ext = path.extname(selfFile);
  const file = path.join(dir, `${base}${ext}`);
  if (ext !== '.ts') return { file, execArgv: [] };
  return { file, execArgv: ['--require', createRequire(selfFile).resolve('tsx/cjs')] };
}
