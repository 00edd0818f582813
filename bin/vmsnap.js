#!/usr/bin/env node
'use strict';
// Runs the compiled build when dist/ matches the sources exactly (`npm run build`, run by
// `npm ci`): no TypeScript loader in a long-lived worker, and a prebuilt workflow bundle.
// Otherwise the TypeScript sources through tsx, so an edited checkout never runs stale output.
const path = require('node:path');
const { distIsFresh } = require('./source-stamp');

const root = path.resolve(__dirname, '..');
if (distIsFresh(root)) {
  require(path.join(root, 'dist', 'src', 'cli', 'main.js'));
} else {
  require('tsx/cjs');
  require(path.join(root, 'src', 'cli', 'main.ts'));
}
