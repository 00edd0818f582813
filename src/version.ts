import { readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * vmsnap's version, from its package.json. Looked up rather than imported: the file sits one
 * level up from src/ and two from dist/src/, and tsc's rootDir keeps package.json out of dist.
 */
export const VERSION: string = (() => {
  for (let dir = __dirname, i = 0; i < 4; i++, dir = path.dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'vmsnap' && pkg.version) return pkg.version;
    } catch {
      // not here: one level up
    }
  }
  return 'unknown';
})();
