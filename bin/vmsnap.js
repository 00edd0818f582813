#!/usr/bin/env node
'use strict';
// An installed release (no src/ beside bin/, as `npm run release` packs it) runs its compiled
// build and nothing else: it has no TypeScript loader to fall back to, so a missing dist/ is an
// incomplete install, said so, never a silent reach for a devDependency.
// A source checkout runs dist/ when it matches the sources exactly (`npm run build`, run by
// `npm ci`), else the TypeScript sources through tsx, so an edited checkout never runs stale output.
const { existsSync } = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const compiled = path.join(root, 'dist', 'src', 'cli', 'main.js');
if (!existsSync(path.join(root, 'src', 'cli', 'main.ts'))) {
  if (!existsSync(compiled)) {
    process.stderr.write(`vmsnap: this installation is incomplete: ${compiled} is missing (a release ships dist/); reinstall the package\n`);
    process.exit(1);
  }
  require(compiled);
} else if (require('./source-stamp').distIsFresh(root)) {
  require(compiled);
} else {
  require('tsx/cjs');
  require(path.join(root, 'src', 'cli', 'main.ts'));
}
