'use strict';
// What scripts/bootstrap.mjs decides from, as pure reads of the checkout (unit-tested in
// test/unit/bootstrap-checks.test.ts). Built-ins only: node_modules may not exist yet.
const { existsSync, readFileSync, readdirSync, statSync } = require('node:fs');
const path = require('node:path');

function readJson(file) {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    return undefined;
  }
}

/**
 * Whether node_modules is what `npm ci` would install from package-lock.json, judged from the
 * lock npm itself writes at the end of an install (node_modules/.package-lock.json): every
 * package the lock requires on every platform (optional ones may be absent: other platforms'
 * binaries) is installed at the locked version, and nothing else is. Returns a reason when not.
 */
function nodeModulesStale(root) {
  const lock = readJson(path.join(root, 'package-lock.json'));
  if (!lock?.packages) return 'package-lock.json missing or unreadable';
  const installed = readJson(path.join(root, 'node_modules', '.package-lock.json'));
  if (!installed?.packages) return 'node_modules missing (or an install that did not finish)';
  for (const [at, want] of Object.entries(lock.packages)) {
    if (at === '') continue;
    const have = installed.packages[at];
    if (!have) {
      if (want.optional) continue;
      return `${at} not installed`;
    }
    if (have.version !== want.version) return `${at} is ${have.version}, the lock says ${want.version}`;
    if (want.integrity && have.integrity && have.integrity !== want.integrity) return `${at} differs from the lock (integrity)`;
  }
  for (const at of Object.keys(installed.packages)) {
    if (!lock.packages[at]) return `${at} is installed but not in the lock`;
  }
  return undefined;
}

function newestMtime(root, rels) {
  let newest = 0;
  for (const rel of rels) {
    const p = path.join(root, rel);
    if (!existsSync(p)) continue;
    const st = statSync(p);
    if (st.isDirectory()) {
      newest = Math.max(newest, newestMtime(p, readdirSync(p)));
    } else newest = Math.max(newest, st.mtimeMs);
  }
  return newest;
}

const ADDON = path.join('build', 'Release', 'vmsnap_rbd.node');
const ADDON_SOURCES = ['native', 'binding.gyp', path.join('scripts', 'build-addon.mjs')];

/** Whether the librbd addon must be (re)built: missing, or older than what it is built from. */
function addonStale(root) {
  const addon = path.join(root, ADDON);
  if (!existsSync(addon)) return `${ADDON} missing`;
  if (newestMtime(root, ADDON_SOURCES) > statSync(addon).mtimeMs) return `${ADDON} is older than native/ or binding.gyp`;
  return undefined;
}

/** Live, and not a zombie: /proc/PID/stat's state field. */
function pidAlive(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

function pidFileAlive(file) {
  try {
    const pid = Number(readFileSync(file, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 && pidAlive(pid);
  } catch {
    return false;
  }
}

/**
 * Whether the lab in LAB_DIR needs `lab/lab.sh up`: a cheap look at its pid files, not a health
 * check (lab:status does real Ceph/Temporal/agent round trips and takes seconds; lab.sh up is
 * idempotent and repairs whatever is not running). The layout is lab/*.sh's: each component
 * writes env.d/<component>.env when it is up and its daemons' pid files under its directory.
 */
function labDown(labDir) {
  for (const c of ['ceph', 'temporal', 'libvirt', 'guests']) {
    if (!existsSync(path.join(labDir, 'env.d', `${c}.env`))) return `${c} is not up`;
  }
  // Two hypervisor hosts (lab/libvirt.sh); a guest may have migrated to the other one.
  const daemons = ['ceph/run/mon.a.pid', 'ceph/run/osd.0.pid', 'temporal/server.pid', 'libvirt/libvirtd.pid', 'libvirt-b/libvirtd.pid'];
  const guestsEnv = readFileSync(path.join(labDir, 'env.d', 'guests.env'), 'utf8');
  const listed = (key) => new RegExp(`${key}='([^']*)'`).exec(guestsEnv)?.[1].split(' ').filter(Boolean) ?? [];
  const guests = [...listed('VMSNAP_GUESTS'), ...listed('VMSNAP_GUESTS_B')];
  if (!guests.length) return 'no guests listed in env.d/guests.env';
  for (const g of guests) daemons.push(`guests/${g}/stamper.pid`);
  for (const rel of daemons) {
    if (!pidFileAlive(path.join(labDir, rel))) return `${rel} names no running process`;
  }
  for (const g of guests) {
    const qemu = ['libvirt', 'libvirt-b'].map((dir) => `${dir}/run/qemu/${g}.pid`);
    if (!qemu.some((rel) => pidFileAlive(path.join(labDir, rel)))) return `${qemu.join(' and ')} name no running process`;
  }
  return undefined;
}

module.exports = { nodeModulesStale, addonStale, labDown, pidAlive };
