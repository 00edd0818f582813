#!/usr/bin/env node
// `npm run release`: the installable artifact, an npm package tarball that installs with Node and
// the librbd/librados runtime libraries only. It holds the compiled build (dist/, with the
// prebuilt workflow bundle), the addon prebuilt for linux-x64/glibc (prebuilds/), bin/ and the
// systemd unit; its package.json has the runtime dependencies at their exact versions, no
// scripts (nothing compiles at install time) and no devDependencies, and npm-shrinkwrap.json
// pins every transitive package to the version this repository's lock file tests.
//
//   node scripts/release.mjs [--out DIR]   prints the tarball's path on stdout
//
// Cached: $VMSNAP_CACHE/release/vmsnap-<version>-<key>.tgz, the key hashing everything the tarball
// is made from (sources, lock file, native/, bin/, this script), so a second run costs ~1 s.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const { sourceStamp, distIsFresh } = require('../bin/source-stamp.js');

const RUNTIME_ENGINES = { node: '>=22' };
const PREBUILT = path.join('prebuilds', 'linux-x64-glibc', 'vmsnap_rbd.node');
// Needed to build, never to run: node-addon-api is C++ headers the addon was compiled with.
const BUILD_ONLY = new Set(['node-addon-api']);

const t0 = Date.now();
const say = (m) => process.stderr.write(`vmsnap release: ${m}\n`);
const outArg = process.argv.indexOf('--out');
const cache = process.env.VMSNAP_CACHE ?? path.join(os.homedir(), '.cache', 'vmsnap');

function files(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(path.join(dir, e.name)) : [path.join(dir, e.name)]));
}

function hashFiles(list) {
  const h = createHash('sha256');
  for (const f of list.sort()) h.update(path.relative(root, f)).update('\0').update(readFileSync(f)).update('\0');
  return h.digest('hex');
}

const nativeSources = [...files(path.join(root, 'native')), path.join(root, 'binding.gyp')];
const key = createHash('sha256')
  .update(sourceStamp(root))
  .update(hashFiles([...nativeSources, ...files(path.join(root, 'bin')), fileURLToPath(import.meta.url), path.join(root, 'deploy', 'vmsnap-worker.service')]))
  .digest('hex')
  .slice(0, 16);
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
const cached = path.join(cache, 'release', `vmsnap-${pkg.version}-${key}.tgz`);
// The release's own addon build, keyed by its sources: a checkout's build/ (maybe a debug or a
// symlinked one) never ends up in a release.
const addonDir = path.join(cache, 'release', `addon-${hashFiles(nativeSources).slice(0, 16)}`);
const ADDON = path.join(addonDir, 'build', 'Release', 'vmsnap_rbd.node');

function deliver(tgz) {
  let out = tgz;
  if (outArg > 0) {
    const dir = path.resolve(process.argv[outArg + 1]);
    mkdirSync(dir, { recursive: true });
    out = path.join(dir, `vmsnap-${pkg.version}.tgz`);
    copyFileSync(tgz, out);
  }
  console.log(out);
}

if (existsSync(cached)) {
  say(`cached ${path.relative(cache, cached)} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  deliver(cached);
  process.exit(0);
}

function run(argv, opts = {}) {
  const r = spawnSync(argv[0], argv.slice(1), { cwd: root, stdio: ['ignore', 'inherit', 'inherit'], ...opts });
  if (r.status !== 0) {
    say(`${argv.join(' ')} exited ${r.status ?? r.signal}`);
    process.exit(1);
  }
  return r;
}

// 1. The compiled build and the addon, rebuilt only when their sources changed.
if (!distIsFresh(root)) run([process.execPath, path.join(root, 'scripts', 'build.mjs')], { stdio: ['ignore', 2, 'inherit'] });
if (!existsSync(ADDON)) run([process.execPath, path.join(root, 'scripts', 'build-addon.mjs'), '--into', addonDir], { stdio: ['ignore', 2, 'inherit'] });
const t1 = Date.now();

// 2. The package tree.
const stage = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-release-'));
const pkgDir = path.join(stage, 'package');
mkdirSync(path.join(pkgDir, path.dirname(PREBUILT)), { recursive: true });
cpSync(path.join(root, 'bin'), path.join(pkgDir, 'bin'), { recursive: true });
// dist/bench is the load test's worker, built with the product for the benchmark; not shipped.
cpSync(path.join(root, 'dist'), path.join(pkgDir, 'dist'), { recursive: true, filter: (src) => src !== path.join(root, 'dist', 'bench') });
copyFileSync(ADDON, path.join(pkgDir, PREBUILT));
mkdirSync(path.join(pkgDir, 'deploy'));
copyFileSync(path.join(root, 'deploy', 'vmsnap-worker.service'), path.join(pkgDir, 'deploy', 'vmsnap-worker.service'));

const dependencies = Object.fromEntries(Object.entries(pkg.dependencies).filter(([name]) => !BUILD_ONLY.has(name)));
const manifest = {
  name: pkg.name,
  version: pkg.version,
  description: pkg.description,
  license: pkg.license,
  // The release's own floor: the LTS line its install test runs on (Node 20 reached end of life
  // in April 2026). The checkout keeps >=20 only because the build hosts here run Node 20.
  engines: RUNTIME_ENGINES,
  os: ['linux'],
  cpu: ['x64'],
  libc: ['glibc'],
  bin: pkg.bin,
  dependencies,
};
writeFileSync(path.join(pkgDir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);

// The lock file's runtime part as the package's shrinkwrap: the installed tree is the tested one.
const lock = JSON.parse(readFileSync(path.join(root, 'package-lock.json'), 'utf8'));
const packages = { '': { name: manifest.name, version: manifest.version, license: manifest.license, dependencies, engines: manifest.engines, bin: manifest.bin } };
for (const [at, entry] of Object.entries(lock.packages)) {
  if (at === '' || entry.dev || entry.link || BUILD_ONLY.has(at.replace(/^node_modules\//, ''))) continue;
  packages[at] = entry;
}
writeFileSync(path.join(pkgDir, 'npm-shrinkwrap.json'), `${JSON.stringify({ name: manifest.name, version: manifest.version, lockfileVersion: 3, requires: true, packages }, null, 2)}\n`);

// 3. npm pack: the same tarball `npm install <file>` takes. --ignore-scripts: there are none; a
// manifest that grew one must not run it here either.
const packed = run(['npm', 'pack', '--ignore-scripts', '--json', '--pack-destination', stage], { cwd: pkgDir, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });
const [{ filename, size, entryCount }] = JSON.parse(packed.stdout);
mkdirSync(path.dirname(cached), { recursive: true });
renameSync(path.join(stage, filename), `${cached}.tmp`);
renameSync(`${cached}.tmp`, cached);
rmSync(stage, { recursive: true, force: true });
say(`packed ${path.basename(cached)}: ${entryCount} files, ${(size / 1048576).toFixed(1)} MiB (build ${((t1 - t0) / 1000).toFixed(1)} s, pack ${((Date.now() - t1) / 1000).toFixed(1)} s)`);
deliver(cached);
