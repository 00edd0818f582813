/**
 * The freeze probe, host side: proof that a guest's filesystems were really frozen, read from
 * what the guest did rather than from what an RPC returned.
 *
 * In each lab guest a writer per data disk appends `<seq> <time>` to `/mnt/<disk>/probe.log`
 * (a synchronous file: each append commits like write+fsync) every ~60 ms, then prints
 * `PROBE <disk> <seq> <guest-start> <guest-end>` on the serial console (lab/guest/probe). While the
 * filesystem is frozen the append blocks, so no line comes out. QEMU logs the console to
 * `<probeDir>/<guest>/serial.log`; a host process (the "stamper" in lab/guests.sh) copies each line
 * to `ticks.log` prefixed with the host time it read it, in microseconds since the epoch.
 *
 * Clock mapping: a tick's `hostMs` is that host arrival time, i.e. the host's CLOCK_REALTIME, the
 * same clock as `Date.now()` in the test that froze the guest, so no guest clock enters the gap
 * computation. (The guest's clock starts from the emulated RTC and was measured ~0.5 s off the
 * host's; its timestamps are kept for diagnostics only.) `hostMs` lags the real completion of
 * the write by the console path — guest tty write, QEMU's serial emulation and file write,
 * inotify, tail, the stamper — typically a few ms on an idle host and tens of ms when the CPUs
 * are saturated; a gap's length is the difference of two such lags, so its error is their jitter.
 * The probe's resolution is its period: a gap is only known to within one tick interval.
 */
import { spawn } from 'node:child_process';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { defaultLabDir, loadLabEnv } from './env';

export interface ProbeTick {
  /** The data disk's libvirt target name (`vdb`, `vdc`, ...). */
  readonly disk: string;
  readonly seq: number;
  /** Host time (ms since the epoch, fractional) at which the completed write was reported. */
  readonly hostMs: number;
  /** Guest clock before the append and after it returned (ms since the epoch; guest clock). */
  readonly guestStartMs: number;
  readonly guestEndMs: number;
}

export interface ProbeGap {
  readonly disk: string;
  /** Host time of the last completed write before the gap (or `from` when none was read). */
  readonly startMs: number;
  /** Host time of the first completed write after the gap (or `to` when none came yet). */
  readonly endMs: number;
  readonly ms: number;
  /** `start`: no tick before the window was read; `end`: no write completed up to `to`. */
  readonly open?: 'start' | 'end';
}

export interface ReadTicksOptions {
  /** Directory with `<guest>/ticks.log`; default: `VMSNAP_PROBE_DIR` of the lab env. */
  readonly probeDir?: string;
  /** Only these disks. */
  readonly disk?: string;
}

let cachedProbeDir: string | undefined;

/** `VMSNAP_PROBE_DIR` from the lab env (`.lab/env`). */
export function labProbeDir(): string {
  if (cachedProbeDir === undefined) {
    const guests = loadLabEnv(defaultLabDir()).guests;
    if (!guests) throw new Error('the lab env has no guests (run npm run lab:up)');
    cachedProbeDir = guests.probeDir;
  }
  return cachedProbeDir;
}

export function ticksPath(probeDir: string, guest: string): string {
  return join(probeDir, guest, 'ticks.log');
}

/** Parse one `ticks.log` line: `<host-us> PROBE <disk> <seq> <guest-start> <guest-end>`. */
export function parseTickLine(line: string): ProbeTick | undefined {
  const m = /^(\d+) PROBE (\S+) (\d+) (\d+\.\d+) (\d+\.\d+)$/.exec(line.trim());
  if (!m) return undefined;
  return {
    hostMs: Number(m[1]) / 1000,
    disk: m[2] as string,
    seq: Number(m[3]),
    guestStartMs: Number(m[4]) * 1000,
    guestEndMs: Number(m[5]) * 1000,
  };
}

const CHUNK = 64 * 1024;

/**
 * The probe ticks of a guest, oldest first. With `sinceHostMs`, only ticks reported at or after
 * it; the file is then read backwards from its end, so the cost does not grow with the log.
 */
export async function readTicks(
  guest: string,
  sinceHostMs?: number,
  options: ReadTicksOptions = {},
): Promise<ProbeTick[]> {
  const file = await open(ticksPath(options.probeDir ?? labProbeDir(), guest), 'r');
  try {
    const { size } = await file.stat();
    let pos = size;
    let tail = ''; // text after pos, starting at a line boundary (or at pos 0)
    const out: ProbeTick[][] = [];
    while (pos > 0) {
      const len = Math.min(CHUNK, pos);
      pos -= len;
      const buf = Buffer.alloc(len);
      await file.read(buf, 0, len, pos);
      const text = buf.toString('latin1') + tail;
      const firstNl = pos > 0 ? text.indexOf('\n') : -1;
      tail = pos > 0 ? text.slice(0, firstNl + 1) : '';
      const whole = pos > 0 ? text.slice(firstNl + 1) : text;
      const ticks = parseLines(whole, options.disk);
      out.unshift(ticks);
      if (sinceHostMs !== undefined && ticks.length > 0 && (ticks[0] as ProbeTick).hostMs < sinceHostMs) {
        break;
      }
      if (firstNl < 0 && pos > 0) tail = text; // a line longer than a chunk: keep reading
    }
    const all = out.flat();
    return sinceHostMs === undefined ? all : all.filter((t) => t.hostMs >= sinceHostMs);
  } finally {
    await file.close();
  }
}

function parseLines(text: string, disk: string | undefined): ProbeTick[] {
  const ticks: ProbeTick[] = [];
  for (const line of text.split('\n')) {
    const tick = parseTickLine(line);
    if (tick && (disk === undefined || tick.disk === disk)) ticks.push(tick);
  }
  return ticks;
}

/**
 * Longest interval without a completed write, per disk, among the intervals that overlap
 * [fromHostMs, toHostMs]. Pass ticks read from somewhat before `from` (one probe period is
 * enough) and after `to`, or the edge intervals come out `open`.
 */
export function longestGapPerDisk(
  ticks: readonly ProbeTick[],
  fromHostMs: number,
  toHostMs: number,
): Map<string, ProbeGap> {
  const byDisk = new Map<string, number[]>();
  for (const t of ticks) {
    const list = byDisk.get(t.disk) ?? [];
    list.push(t.hostMs);
    byDisk.set(t.disk, list);
  }
  const result = new Map<string, ProbeGap>();
  for (const [disk, times] of byDisk) {
    times.sort((a, b) => a - b);
    let best: ProbeGap | undefined;
    const consider = (gap: ProbeGap): void => {
      if (gap.endMs >= fromHostMs && gap.startMs <= toHostMs && (!best || gap.ms > best.ms)) best = gap;
    };
    const first = times[0] as number;
    const last = times[times.length - 1] as number;
    if (first > fromHostMs) {
      consider({ disk, startMs: fromHostMs, endMs: first, ms: first - fromHostMs, open: 'start' });
    }
    for (let i = 1; i < times.length; i++) {
      const a = times[i - 1] as number;
      const b = times[i] as number;
      consider({ disk, startMs: a, endMs: b, ms: b - a });
    }
    if (last < toHostMs) {
      consider({ disk, startMs: last, endMs: toHostMs, ms: toHostMs - last, open: 'end' });
    }
    if (best) result.set(disk, best);
  }
  return result;
}

/**
 * The longest interval without a completed write, on any disk, overlapping [fromHostMs, toHostMs]
 * (ms, host clock). `undefined` when there are no ticks at all.
 */
export function longestGap(
  ticks: readonly ProbeTick[],
  fromHostMs: number,
  toHostMs: number,
): ProbeGap | undefined {
  let best: ProbeGap | undefined;
  for (const gap of longestGapPerDisk(ticks, fromHostMs, toHostMs).values()) {
    if (!best || gap.ms > best.ms) best = gap;
  }
  return best;
}

export type SnapshotFsState = 'clean' | 'needs_recovery' | 'not-ext4';

export interface SnapshotRef {
  readonly cephConf: string;
  /** Ceph client id without `client.` (e.g. `admin`). */
  readonly id: string;
  readonly keyring: string;
  readonly pool: string;
  readonly image: string;
  readonly snap: string;
}

const EXT4_MAGIC = 0xef53;
const EXT4_FEATURE_INCOMPAT_RECOVER = 0x4;

/**
 * Classify an ext4 superblock (the 1024 bytes at offset 1024 of the device): `needs_recovery` when
 * the journal holds transactions not yet written in place — what a crash-consistent copy of a
 * mounted filesystem shows — and `clean` when it does not, which is what a frozen (or unmounted)
 * filesystem shows.
 */
export function classifySuperblock(sb: Buffer): SnapshotFsState {
  if (sb.length < 0x64 || sb.readUInt16LE(0x38) !== EXT4_MAGIC) return 'not-ext4';
  const incompat = sb.readUInt32LE(0x60);
  return incompat & EXT4_FEATURE_INCOMPAT_RECOVER ? 'needs_recovery' : 'clean';
}

/**
 * Bytes [offset, offset+length) of an RBD image or snapshot, from `rbd export <image>@<snap> -`
 * (stopped as soon as they have arrived; spawned with an argv array, no shell).
 */
export function readRbdBytes(ref: SnapshotRef, offset: number, length: number, timeoutMs = 60_000): Promise<Buffer> {
  const spec = `${ref.pool}/${ref.image}@${ref.snap}`;
  const args = ['-c', ref.cephConf, '--id', ref.id, '--keyring', ref.keyring, 'export', '--no-progress', spec, '-'];
  return new Promise((resolve, reject) => {
    const child = spawn('rbd', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [];
    let got = 0;
    let stderr = '';
    let done = false;
    const finish = (err: Error | undefined, value?: Buffer): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (child.exitCode === null) child.kill('SIGKILL');
      if (err) reject(err);
      else resolve(value as Buffer);
    };
    const timer = setTimeout(() => finish(new Error(`rbd export ${spec}: no data in ${timeoutMs} ms`)), timeoutMs);
    child.stdout.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      got += chunk.length;
      if (got >= offset + length) finish(undefined, Buffer.concat(chunks).subarray(offset, offset + length));
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.on('error', (err) => finish(err));
    child.on('close', (code) => {
      if (got >= offset + length) return;
      finish(new Error(`rbd export ${spec} exited ${code} after ${got} bytes: ${stderr.trim()}`));
    });
  });
}

/**
 * Whether the ext4 filesystem in an RBD snapshot is clean (as left by a freeze) or needs journal
 * recovery (a crash-consistent copy of a mounted filesystem). Reads the superblock, bytes
 * 1024..2047, and checks `s_feature_incompat` for RECOVER (0x4).
 */
export async function snapshotFsState(ref: SnapshotRef): Promise<SnapshotFsState> {
  return classifySuperblock(await readRbdBytes(ref, 1024, 1024));
}
