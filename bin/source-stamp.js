'use strict';
// One hash over everything the compiled output is made from, so a `dist/` built from other
// sources (an edit, a checkout) is never run: bin/vmsnap.js falls back to the sources then.
const { createHash } = require('node:crypto');
const { existsSync, readdirSync, readFileSync } = require('node:fs');
const path = require('node:path');

const DIRS = ['src', 'workflows', 'activities'];
// bench/load-worker.ts is compiled with the product so the load test measures the worker as it ships.
const FILES = ['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json', 'bench/load-worker.ts'];

function listTs(root, dir, out) {
  for (const e of readdirSync(path.join(root, dir), { withFileTypes: true })) {
    const rel = path.join(dir, e.name);
    if (e.isDirectory()) listTs(root, rel, out);
    else if (e.name.endsWith('.ts')) out.push(rel);
  }
  return out;
}

function sourceStamp(root) {
  const files = [...DIRS.flatMap((d) => listTs(root, d, [])), ...FILES.filter((f) => existsSync(path.join(root, f)))].sort();
  const h = createHash('sha256');
  for (const f of files) h.update(f).update('\0').update(readFileSync(path.join(root, f))).update('\0');
  return h.digest('hex');
}

/** True when dist/ holds a complete build of exactly the current sources. */
function distIsFresh(root) {
  try {
    const built = JSON.parse(readFileSync(path.join(root, 'dist', 'build-stamp.json'), 'utf8'));
    return (
      built.stamp === sourceStamp(root) &&
      existsSync(path.join(root, 'dist', 'src', 'cli', 'main.js')) &&
      existsSync(path.join(root, 'dist', 'fleet-workflow-bundle.js'))
    );
  } catch {
    return false;
  }
}

module.exports = { sourceStamp, distIsFresh };
