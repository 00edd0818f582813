#!/usr/bin/env node
// Builds the librbd/librados addon (native/, binding.gyp) with node-gyp against the installed
// Node headers. Run by `npm ci`/`npm install` (root package `install` script) or by hand:
//   node scripts/build-addon.mjs [--debug]
//   node scripts/build-addon.mjs --asan   AddressSanitizer + UBSan build into build-asan/ (the
//                                         normal build is untouched); run by scripts/test-asan.sh
//   node scripts/build-addon.mjs --into DIR  the release build into DIR/build/Release (the
//                                         checkout's build/ is untouched); run by scripts/release.mjs
// Never downloads anything: node-gyp gets --nodedir pointing at local headers.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);

function fail(message) {
  console.error(`\nvmsnap: cannot build the native Ceph addon: ${message}\n`);
  process.exit(1);
}

// 1. librbd/librados development files (headers + unversioned .so for the linker).
const includeDirs = ['/usr/include', '/usr/local/include'];
const libDirs = ['/usr/lib/x86_64-linux-gnu', '/usr/lib/aarch64-linux-gnu', '/usr/lib64', '/usr/lib', '/usr/local/lib'];
const haveHeader = (h) => includeDirs.some((d) => existsSync(path.join(d, h)));
const haveLib = (l) => libDirs.some((d) => existsSync(path.join(d, l)));
const missing = [];
if (!haveHeader('rbd/librbd.h') || !haveLib('librbd.so')) missing.push('librbd-dev');
if (!haveHeader('rados/librados.h') || !haveLib('librados.so')) missing.push('librados-dev');
if (missing.length > 0) {
  fail(
    `${missing.join(' and ')} not found (rbd/librbd.h, rados/librados.h, librbd.so, librados.so).\n` +
      'install `librbd-dev librados-dev` (apt): sudo apt-get install librbd-dev librados-dev',
  );
}

// 2. Node headers: npm's configured nodedir, else the prefix of the running node.
function nodedir() {
  const candidates = [process.env.npm_config_nodedir, path.resolve(path.dirname(process.execPath), '..')];
  for (const dir of candidates) {
    if (dir && existsSync(path.join(dir, 'include', 'node', 'node_api.h'))) return dir;
  }
  fail(
    `Node headers not found (looked for include/node/node_api.h under ${candidates.filter(Boolean).join(', ')}).\n` +
      'Set `npm config set nodedir <prefix>` to a directory with include/node (Debian: nodedir=/usr).',
  );
}

// 3. node-gyp: the one npm runs scripts with, else npm's bundled copy, else a local install.
function nodeGyp() {
  const candidates = [
    process.env.npm_config_node_gyp,
    path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
  ];
  try {
    candidates.push(require.resolve('node-gyp/bin/node-gyp.js'));
  } catch {
    // not installed locally
  }
  try {
    const npmRoot = spawnSync('npm', ['root', '-g'], { encoding: 'utf8' }).stdout?.trim();
    if (npmRoot) candidates.push(path.join(npmRoot, 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'));
  } catch {
    // no npm on PATH
  }
  const found = candidates.find((c) => c && existsSync(c));
  if (!found) fail('node-gyp not found (it ships with npm; or `npm i -D node-gyp`).');
  return found;
}

// The sanitizer build compiles the same sources from a generated binding.gyp in build-asan/, so
// node-gyp's build/ there never touches the production addon in build/.
// -fno-sanitize-recover=all: UBSan aborts at the first report, as ASan does.
const SANITIZE = ['-fsanitize=address,undefined', '-fno-sanitize-recover=all', '-fno-omit-frame-pointer', '-g', '-O1'];

function project(dir, sanitize) {
  mkdirSync(dir, { recursive: true });
  const gyp = JSON.parse(readFileSync(path.join(root, 'binding.gyp'), 'utf8'));
  for (const t of gyp.targets) {
    t.sources = t.sources.map((s) => path.relative(dir, path.join(root, s)));
    // node-addon-api's include_dir is relative to the cwd node-gyp runs in: resolve it from here.
    t.include_dirs = [path.dirname(require.resolve('node-addon-api/package.json'))];
    if (!sanitize) continue;
    t.cflags_cc = [...t.cflags_cc, ...SANITIZE];
    t.ldflags = [...(t.ldflags ?? []), '-fsanitize=address,undefined'];
  }
  writeFileSync(path.join(dir, 'binding.gyp'), `${JSON.stringify(gyp, null, 2)}\n`);
  return dir;
}

const into = process.argv.indexOf('--into');
const cwd = process.argv.includes('--asan')
  ? project(path.join(root, 'build-asan'), true)
  : into > 0
    ? project(path.resolve(process.argv[into + 1]), false)
    : root;
const started = Date.now();
const args = [nodeGyp(), 'rebuild', `--nodedir=${nodedir()}`, '--jobs=max'];
if (process.argv.includes('--debug')) args.push('--debug');
const r = spawnSync(process.execPath, args, { cwd, stdio: 'inherit', env: { ...process.env, npm_config_nodedir: nodedir() } });
if (r.status !== 0) fail(`node-gyp exited with ${r.status ?? r.signal}; see the compiler output above.`);
const built = path.relative(root, path.join(cwd, 'build', 'Release', 'vmsnap_rbd.node'));
console.log(`vmsnap: built ${built} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
