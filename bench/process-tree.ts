/**
 * A worker's memory with its child processes: every descendant of its pid (through each thread's
 * /proc/PID/task/TID/children, so a child spawned by any thread counts), RSS from /proc/PID/status,
 * each sorted by what it runs — the snapshotter (src/ceph/snapshotter-child), a freeze guard's
 * watchdog (src/safety/watchdog), or something else. A watchdog lives in its own session but is
 * the worker's child until the worker exits, so it is found here while its freeze is open.
 */
import { readdirSync, readFileSync } from 'node:fs';

export type ChildKind = 'snapshotter' | 'watchdog' | 'other';

export interface TreeRss {
  /** The worker process alone (KiB). */
  workerKiB: number;
  /** Per kind of descendant: how many, and their RSS summed (KiB). */
  children: Record<ChildKind, { count: number; kib: number }>;
  /** Worker + every descendant (KiB). */
  totalKiB: number;
}

export function rssKiB(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0; // gone meanwhile
  }
}

export function childPids(pid: number): number[] {
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  const out = new Set<number>();
  for (const tid of tids) {
    try {
      for (const c of readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim().split(/\s+/)) if (c) out.add(Number(c));
    } catch {
      // the thread ended
    }
  }
  return [...out];
}

/** What a process runs, from its command line (pure, so its rule is checked without processes). */
export function kindOf(cmdline: string): ChildKind {
  if (/snapshotter-child/.test(cmdline)) return 'snapshotter';
  if (/\bwatchdog(\.[jt]s)?\b/.test(cmdline)) return 'watchdog';
  return 'other';
}

function cmdlineOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return '';
  }
}

export function treeRss(pid: number): TreeRss {
  const children: TreeRss['children'] = { snapshotter: { count: 0, kib: 0 }, watchdog: { count: 0, kib: 0 }, other: { count: 0, kib: 0 } };
  const workerKiB = rssKiB(pid);
  let total = workerKiB;
  const seen = new Set<number>([pid]);
  const queue = childPids(pid);
  while (queue.length) {
    const p = queue.shift()!;
    if (seen.has(p)) continue;
    seen.add(p);
    const kib = rssKiB(p);
    const c = children[kindOf(cmdlineOf(p))];
    c.count++;
    c.kib += kib;
    total += kib;
    queue.push(...childPids(p));
  }
  return { workerKiB, children, totalKiB: total };
}

/** Peaks over samples, each figure on its own (the peak total need not hold the peak worker). */
export class TreePeaks {
  workerKiB = 0;
  totalKiB = 0;
  children: Record<ChildKind, { count: number; kib: number }> = { snapshotter: { count: 0, kib: 0 }, watchdog: { count: 0, kib: 0 }, other: { count: 0, kib: 0 } };

  add(t: TreeRss): void {
    this.workerKiB = Math.max(this.workerKiB, t.workerKiB);
    this.totalKiB = Math.max(this.totalKiB, t.totalKiB);
    for (const k of Object.keys(this.children) as ChildKind[]) {
      this.children[k] = { count: Math.max(this.children[k].count, t.children[k].count), kib: Math.max(this.children[k].kib, t.children[k].kib) };
    }
  }
}
