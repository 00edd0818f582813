/**
 * The bench's write-load lane's writers (bench/write-load.ts), also used by the pre-flush tests: inside the lab guest, one writer per data disk writes N MiB into
 * `/mnt/<disk>/vmsnap-bench-dirty` (through the page cache, no sync), at most R MiB/s each, and the
 * run under test starts the moment they have all returned — so the guest holds whatever of those
 * writes its kernel has not written back yet. The lab guest's data disks are 64 MiB, so the file
 * wraps at WRAP_MIB: 256 MiB written is 256 MiB of page-cache writes, of which the kernel keeps at
 * most its dirty limit (vm.dirty_ratio of ~190 MiB of dirtyable memory here, ~38 MiB) unwritten.
 * What it left is read from /proc/meminfo (Dirty + Writeback, the whole guest) as the writers end.
 */
import type { DomainRef, LibvirtClient } from '../../src/libvirt';
import { busyboxSh, runInGuest } from './guest-run';

/** The file wraps here on the lab guests: their data disks hold 52 MiB free beside the probe's log. */
export const WRAP_MIB = 32;
export const DIRTY_FILE = 'vmsnap-bench-dirty';
const WRITERS_PID = '/run/vmsnap/bench-writers.pid';

export interface DirtyResult {
  /** MiB written per disk. */
  mib: number;
  /** Host clock: writers started → all returned. */
  writeMs: number;
  startedAt: number;
  endedAt: number;
  /** The guest's Dirty and Writeback (KiB) when the writers returned. */
  dirtyKiB: number;
  writebackKiB: number;
}

/** The writers' script (busybox ash): pure, so its shape is unit-checked without a guest. */
export function writerScript(mib: number, rateMiBps: number, wrapMiB = WRAP_MIB): string {
  if (!Number.isInteger(mib) || mib < 0) throw new Error(`dirty MiB must be a whole number >= 0, not ${mib}`);
  if (!Number.isInteger(wrapMiB) || wrapMiB < 4 || wrapMiB % 4) throw new Error(`the writers' file wraps at a multiple of 4 MiB, not ${wrapMiB}`);
  // Unpaced writers go 4 MiB per dd (fewer forks: a fork costs the TCG guest milliseconds); paced
  // ones 1 MiB per dd with a sleep after each, an upper bound on the rate.
  const chunk = rateMiBps > 0 ? 1 : 4;
  const pause = rateMiBps > 0 ? `usleep ${Math.round(1_000_000 / rateMiBps)}` : ':';
  return [
    `echo $$ > ${WRITERS_PID}`,
    `n=${mib}; w=${wrapMiB}; c=${chunk}`,
    'for d in $(cat /run/vmsnap/disks); do',
    `  ( f=/mnt/$d/${DIRTY_FILE}; i=0`,
    '    while [ $i -lt $n ]; do k=$c; [ $((n - i)) -lt $k ] && k=$((n - i))',
    '      dd if=/dev/zero of=$f bs=1048576 count=$k seek=$((i % w)) conv=notrunc 2>/dev/null || exit 1',
    `      i=$((i + k)); ${pause}`,
    '    done ) &',
    'done',
    'wait',
    "grep -E '^(Dirty|Writeback):' /proc/meminfo",
  ].join('\n');
}

/**
 * Stops writers still running (a bench interrupted mid-write) and removes their files: the writers'
 * shells first, else a dd started after the rm would create its file again.
 */
export function stopWritersScript(): string {
  return `p=$(cat ${WRITERS_PID} 2>/dev/null); [ -n "$p" ] && { pkill -P "$p"; kill "$p"; } 2>/dev/null; for d in $(cat /run/vmsnap/disks); do rm -f /mnt/$d/${DIRTY_FILE}; done; sync`;
}

/** `Dirty: 123 kB` / `Writeback: 4 kB` lines → KiB. */
export function parseDirty(meminfo: string): { dirtyKiB: number; writebackKiB: number } {
  const kib = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(meminfo)?.[1] ?? NaN);
  return { dirtyKiB: kib('Dirty'), writebackKiB: kib('Writeback') };
}

/** `wrapMiB`: where each disk's file wraps; it must fit the disk beside the probe's log. */
export async function dirtyGuest(lv: LibvirtClient, dom: DomainRef, mib: number, rateMiBps: number, wrapMiB = WRAP_MIB): Promise<DirtyResult> {
  const r = await runInGuest(lv, dom, busyboxSh(writerScript(mib, rateMiBps, wrapMiB)), { timeoutMs: 300_000, pollMs: 20 });
  if (r.code !== 0) throw new Error(`writers in ${dom.name} failed (exit ${r.code}): ${r.stderr.trim()}`);
  return { mib, writeMs: r.ms, startedAt: r.startedAt, endedAt: r.exitedAt, ...parseDirty(r.stdout) };
}

/** Removes the writers' files (each run's freeze wrote them back; nothing is left dirty). */
export async function removeDirtyFiles(lv: LibvirtClient, dom: DomainRef): Promise<void> {
  const r = await runInGuest(lv, dom, busyboxSh(stopWritersScript()), { timeoutMs: 60_000 });
  if (r.code !== 0) throw new Error(`removing the writers' files in ${dom.name} failed (exit ${r.code}): ${r.stderr.trim()}`);
}
