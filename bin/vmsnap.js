#!/usr/bin/env node
// Runs the TypeScript sources directly (tsx): one artifact, no stale build output on hosts.
require('tsx/cjs');
require('../src/cli/main.ts');
