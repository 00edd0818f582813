#!/usr/bin/env node
// Run first by `npm run demo`, `npm test` and each lane's script, so that on a fresh clone of a
// fresh machine those commands need nothing typed before them. Every step is skipped when its result is there:
//   1. system packages and the Temporal binary: lab/deps.sh (a no-op when all is present); with
//      or without --lab, since the unit lane's workflow tests start a dev server from that binary
//   2. `npm ci` when node_modules is missing or differs from package-lock.json (npm ci also
//      builds the librbd addon and dist/: the package's install and prepare scripts)
//   3. the addon when it is missing or older than native/; dist/ when not built from these sources
//   4. with --lab: `lab/lab.sh up` (which builds the guest image) when a lab process is not
//      running; the lab is left up afterwards, as lab:up leaves it
// Plain node and built-ins only: it runs before node_modules (tsx, vitest) exists.
// Prints one summary line, `bootstrap: <step> <seconds> s, ...`, which .ci/run collects.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const { nodeModulesStale, addonStale, labDown } = require('./bootstrap-checks.js');
const { distIsFresh } = require('../bin/source-stamp.js');

const withLab = process.argv.includes('--lab');
// The lab scripts' rule (lab/lib.sh): LAB_DIR, else VMSNAP_LAB_DIR, else <repo>/.lab.
const labDir = process.env.LAB_DIR ?? process.env.VMSNAP_LAB_DIR ?? path.join(root, '.lab');
const done = [];
const t0 = performance.now();

function step(name, argv) {
  const t = performance.now();
  console.error(`bootstrap: ${name}: ${argv.join(' ')}`);
  const r = spawnSync(argv[0], argv.slice(1), { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
  const secs = ((performance.now() - t) / 1000).toFixed(1);
  done.push(`${name} ${secs} s`);
  if (r.status !== 0) {
    console.error(`bootstrap: ${name} failed (${r.error?.message ?? `exit ${r.status ?? r.signal}`}) after ${secs} s`);
    process.exit(1);
  }
}

// deps.sh prints only what it did; its checks (dpkg-query, the cached binary) are quick.
step('deps', ['bash', path.join(root, 'lab/deps.sh')]);

const stale = nodeModulesStale(root);
if (stale) {
  console.error(`bootstrap: ${stale}`);
  step('npm ci', ['npm', 'ci', '--no-audit', '--no-fund']);
} else {
  const addon = addonStale(root);
  if (addon) {
    console.error(`bootstrap: ${addon}`);
    step('addon', [process.execPath, path.join(root, 'scripts/build-addon.mjs')]);
  }
  if (!distIsFresh(root)) {
    console.error('bootstrap: dist/ was not built from these sources');
    step('build', [process.execPath, path.join(root, 'scripts/build.mjs')]);
  }
}

if (withLab) {
  const down = labDown(labDir);
  if (down) {
    console.error(`bootstrap: lab: ${down}`);
    step('lab:up', ['bash', path.join(root, 'lab/lab.sh'), 'up']);
  }
}

console.error(`bootstrap: ${done.length ? done.join(', ') : 'nothing to do'}; ${((performance.now() - t0) / 1000).toFixed(1)} s in all`);
