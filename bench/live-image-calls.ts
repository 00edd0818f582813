/*
 * Which librbd calls on a live VM disk go through the image's exclusive-lock owner (the VM's
 * QEMU)? Each call runs in its own process (bench/live-call-child.ts), once with the owner
 * running and once with it SIGSTOPped; a call still blocked after the bound is SIGKILLed (before
 * librbd's ~30 s lock break), its dead session blocklisted, and QEMU resumed. Prints a markdown
 * table (the README's "Calls on a live image"). Also times an omap write on a vmsnap-owned
 * object (the owner record) with the owner stopped.
 *
 *   npx tsx bench/live-image-calls.ts [--guest vmsnap-g1] [--bound-ms 10000]
 */
import { execFileSync, spawn } from 'node:child_process';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { cephTestEnv, cliArgs } from '../support/ceph';
import { labQemuPid } from '../support/lab/guest-ctl';
import { labVars, need } from '../support/lab/env';

const { values } = parseArgs({ options: { guest: { type: 'string', default: 'vmsnap-g1' }, 'bound-ms': { type: 'string', default: '10000' } } });
const guest = values.guest!;
const boundMs = Number(values['bound-ms']);
const pool = 'vms';
const image = `${guest}-vdb`;
const env = cephTestEnv();
const labDir = need(labVars(), 'LIBVIRT_LAB_DIR');
const admin = cliArgs(env);
const TSX = path.resolve(__dirname, '../node_modules/.bin/tsx');

const sh = (cmd: string, args: string[]): string => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const rbd = (...a: string[]) => sh('rbd', [...admin, ...a]);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const qemuPid = (): number => labQemuPid(labDir, guest);
const snaps = (): string[] => (JSON.parse(rbd('snap', 'ls', '--format', 'json', `${pool}/${image}`)) as { name: string }[]).map((s) => s.name);
const lockOwner = (): string => {
  const l = JSON.parse(rbd('lock', 'ls', '--format', 'json', `${pool}/${image}`)) as { address: string }[] | Record<string, { address: string }>;
  return (Array.isArray(l) ? l : Object.values(l))[0]?.address ?? '';
};

interface Outcome { ms?: number; error?: string; blocked?: boolean }

async function once(op: string, snap: string, stop: boolean): Promise<Outcome> {
  const child = spawn(TSX, [path.join(__dirname, 'live-call-child.ts'), op, pool, image, snap], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  const seen = (re: RegExp) => new Promise<RegExpExecArray>((resolve) => {
    const check = () => { const m = re.exec(out); if (m) { child.stdout.off('data', onData); resolve(m); } };
    const onData = (d: Buffer) => { out += d.toString(); check(); };
    child.stdout.on('data', onData);
    check();
  });
  await seen(/READY\n/);
  const addr = /ADDR (\S+)/.exec(out)?.[1] ?? '';
  const pid = qemuPid();
  if (stop) process.kill(pid, 'SIGSTOP');
  try {
    await sleep(200);
    child.stdin.write('GO\n');
    const r = await Promise.race([seen(/(MS|ERR) (.*)\n/), sleep(boundMs).then(() => undefined)]);
    if (!r) {
      child.kill('SIGKILL');
      return { blocked: true };
    }
    return r[1] === 'MS' ? { ms: Number(r[2]) } : { error: r[2] };
  } finally {
    if (stop) process.kill(pid, 'SIGCONT');
    if (child.exitCode === null && child.signalCode === null) await new Promise((r) => child.once('exit', r));
    // A killed caller's watch would stall the next call ~30 s: fence its (dead) session.
    if (addr && child.signalCode === 'SIGKILL') sh('ceph', [...admin, 'osd', 'blocklist', 'add', addr, '3600']);
    await sleep(stop ? 3000 : 200); // QEMU catches up on queued requests (a late snapshot lands now)
  }
}

async function main(): Promise<void> {
  const owner = lockOwner();
  if (!owner) throw new Error(`${pool}/${image} has no lock owner: is ${guest} running (its probe writes)?`);
  const ops = ['open', 'open read-only', 'open read-only at snapshot', 'close', 'metadata_get', 'metadata_list', 'metadata_set',
    'metadata_remove', 'snap_list', 'snap_exists', 'snap_create', 'snap_remove'];
  const rows: string[] = [];
  let n = 0;
  for (const op of ops) {
    const cells: string[] = [];
    for (const stop of [false, true]) {
      const snap = `lockprobe-${process.pid}-${n++}`;
      if (op !== 'snap_create') rbd('snap', 'create', `${pool}/${image}@${snap}`);
      if (op === 'metadata_remove') rbd('image-meta', 'set', `${pool}/${image}`, 'vmsnap.probe', 'x');
      const o = await once(op, snap, stop);
      cells.push(o.blocked ? `blocked > ${boundMs / 1000} s (killed)` : o.error ? `error ${o.error}` : `${o.ms!.toFixed(0)} ms`);
      for (const s of snaps().filter((x) => x.startsWith(`lockprobe-${process.pid}-`))) rbd('snap', 'rm', `${pool}/${image}@${s}`);
      try { rbd('image-meta', 'remove', `${pool}/${image}`, 'vmsnap.probe'); } catch { /* absent */ }
    }
    rows.push(`| ${op} | ${cells[0]} | ${cells[1]} |`);
    process.stderr.write(`${rows.at(-1)}\n`);
  }
  // The owner record's home: an omap write on a vmsnap-owned object, owner stopped.
  const pid = qemuPid();
  process.kill(pid, 'SIGSTOP');
  let omapMs: number;
  try {
    const t0 = performance.now();
    sh('rados', [...admin, '-p', pool, 'setomapval', 'vmsnap.lockprobe', 'k', 'v']);
    omapMs = performance.now() - t0;
  } finally {
    process.kill(pid, 'SIGCONT');
  }
  sh('rados', [...admin, '-p', pool, 'rm', 'vmsnap.lockprobe']);
  rows.push(`| omap set on a vmsnap object (\`rados setomapval\`, a process) | — | ${omapMs.toFixed(0)} ms |`);
  const blocklisted = sh('ceph', [...admin, 'osd', 'blocklist', 'ls']).includes(owner);
  process.stdout.write(['| call (own process, image opened before the owner stops) | owner running | owner SIGSTOPped |', '| --- | --- | --- |', ...rows].join('\n') + '\n');
  process.stdout.write(`QEMU lock owner ${owner} blocklisted afterwards: ${blocklisted}\n`);
  if (blocklisted) process.exitCode = 1;
}

void main();
