import { Snapshotter } from './snapshotter';
import type {
  BoundOptions, CreateMirrorSnapsResult, CreateSnapsResult, MetadataWriteResult, MirrorState, RemoveSnapsResult, SnapFailure,
  SnapRequest, SnapshotterOptions,
} from './snapshotter';

/*
 * One snapshotter child per VM in flight (a "lane"), so that one VM's hung lock owner costs only
 * that VM's child. A bounded call that times out SIGKILLs its child; with a single shared child
 * that killed every other VM's in-flight snapshot too (SnapshotTimeout for all of them).
 *
 * A lane is keyed by the set of images a call names — a VM's disks, which no other VM shares —
 * so prepare, snapshot and cleanup of one run meet the same child and its warm image handles.
 * A lane exits after `laneIdleMs` without calls. One spare child is kept started, so a new lane
 * adopts a connected child instead of paying a fork + rados_connect (~0.3 s here).
 *
 * Each child is a Node process with its own librados session, ~70 MiB of RSS: the load bench's 48
 * RBD-only runs kept 51 of them (3.7 GiB) because every lane waits out `laneIdleMs` after its last
 * call. Past `maxLanes`, a new lane first closes the least recently used idle one (no call in
 * flight): the count stays near the lanes actually in use. A lane in use is never closed, so
 * `maxLanes` is a soft bound: more VMs with calls in flight at once still get a child each.
 */

export interface SnapshotterPoolOptions extends SnapshotterOptions {
  /** A lane's child exits this long after its last call (default 30 s). */
  laneIdleMs?: number;
  /** Past this many lanes, a new lane closes the least recently used idle one first (default 8). */
  maxLanes?: number;
  /** Called with a lane's slot number and its child's librados address (for fencing after a crash). */
  onLaneChildReady?: (slot: number, addrs: string) => void;
}

/** A call's bound, and its lane when the call names only some of a VM's disks (default: the images it names). */
export interface LaneOptions extends BoundOptions {
  lane?: string;
}

interface Lane {
  s: Snapshotter;
  slot: number;
  busy: number;
  lastUsed: number;
}

export class SnapshotterPool {
  private readonly lanes = new Map<string, Lane>();
  private spare?: { s: Snapshotter; slot: number };
  private readonly freeSlots: number[] = [];
  private nextSlot = 0;
  private timer?: NodeJS.Timeout;
  private closed = false;

  constructor(private readonly options: SnapshotterPoolOptions) {}

  /** Starts the spare child now, so the first lane does not pay for it. */
  async start(): Promise<void> {
    await this.ensureSpare().s.start();
    this.timer ??= setInterval(() => this.closeIdle(), Math.max(250, (this.options.laneIdleMs ?? 30_000) / 2));
    this.timer.unref();
  }

  /** The spare child's pid (for logs and the load bench). */
  get pid(): number | undefined {
    return this.spare?.s.pid;
  }

  /** Children running now: lanes plus the spare (for tests and the RSS measurement). */
  get pids(): number[] {
    const all = [...[...this.lanes.values()].map((l) => l.s.pid), this.spare?.s.pid];
    return all.filter((p): p is number => p !== undefined);
  }

  /** The child pid of the lane these requests meet (tests). */
  lanePid(requests: SnapRequest[]): number | undefined {
    return this.lanes.get(laneKey(requests))?.s.pid;
  }

  /** Lanes open now, by key. */
  get laneKeys(): string[] {
    return [...this.lanes.keys()];
  }

  prepare(requests: SnapRequest[], o: LaneOptions): Promise<{ opened: SnapRequest[]; failed: SnapFailure[]; timedOut: boolean }> {
    return this.onLane(o.lane ?? laneKey(requests), (s) => s.prepare(requests, o));
  }

  createSnaps(requests: SnapRequest[], o: LaneOptions): Promise<CreateSnapsResult> {
    return this.onLane(o.lane ?? laneKey(requests), (s) => s.createSnaps(requests, o));
  }

  createMirrorSnaps(requests: SnapRequest[], o: LaneOptions): Promise<CreateMirrorSnapsResult> {
    return this.onLane(o.lane ?? laneKey(requests), (s) => s.createMirrorSnaps(requests, o));
  }

  mirrorStates(requests: SnapRequest[], o: LaneOptions): Promise<Map<SnapRequest, MirrorState>> {
    return this.onLane(o.lane ?? laneKey(requests), (s) => s.mirrorStates(requests, o));
  }

  setMetadata(requests: SnapRequest[], o: LaneOptions): Promise<MetadataWriteResult> {
    return this.onLane(o.lane ?? laneKey(requests), (s) => s.setMetadata(requests, o));
  }

  removeMetadata(requests: SnapRequest[], o: LaneOptions): Promise<MetadataWriteResult> {
    return this.onLane(o.lane ?? laneKey(requests), (s) => s.removeMetadata(requests, o));
  }

  metadataKeys(requests: SnapRequest[], prefix: string, o: LaneOptions): Promise<Map<SnapRequest, string[]>> {
    return this.onLane(o.lane ?? laneKey(requests), (s) => s.metadataKeys(requests, prefix, o));
  }

  userSnapNames(requests: SnapRequest[], o: LaneOptions): Promise<Map<SnapRequest, string[]>> {
    return this.onLane(o.lane ?? laneKey(requests), (s) => s.userSnapNames(requests, o));
  }

  removeSnaps(requests: SnapRequest[], o: LaneOptions): Promise<RemoveSnapsResult> {
    return this.onLane(o.lane ?? laneKey(requests), (s) => s.removeSnaps(requests, o));
  }

  snapExists(request: SnapRequest, o: LaneOptions): Promise<boolean> {
    return this.onLane(o.lane ?? laneKey([request]), (s) => s.snapExists(request, o));
  }

  /** Blocklisting of killed children finished, in every lane (tests). */
  async settled(): Promise<void> {
    await Promise.all([...this.lanes.values()].map((l) => l.s.settled()));
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    const all = [...this.lanes.values()].map((l) => l.s);
    if (this.spare) all.push(this.spare.s);
    this.lanes.clear();
    this.spare = undefined;
    await Promise.all(all.map((s) => s.close()));
  }

  private async onLane<T>(key: string, fn: (s: Snapshotter) => Promise<T>): Promise<T> {
    const lane = this.laneFor(key);
    lane.busy++;
    try {
      return await fn(lane.s);
    } finally {
      lane.busy--;
      lane.lastUsed = Date.now();
    }
  }

  private laneFor(key: string): Lane {
    let lane = this.lanes.get(key);
    if (lane) return lane;
    for (const key of idleLanesOverCap(this.lanes, this.options.maxLanes ?? DEFAULT_MAX_LANES)) this.closeLane(key);
    const adopted = this.spare ?? this.newSnapshotter();
    this.spare = undefined;
    lane = { s: adopted.s, slot: adopted.slot, busy: 0, lastUsed: Date.now() };
    this.lanes.set(key, lane);
    if (!this.closed) void this.ensureSpare().s.start().catch(() => undefined);
    return lane;
  }

  private ensureSpare(): { s: Snapshotter; slot: number } {
    this.spare ??= this.newSnapshotter();
    return this.spare;
  }

  private newSnapshotter(): { s: Snapshotter; slot: number } {
    const slot = this.freeSlots.pop() ?? this.nextSlot++;
    const { laneIdleMs: _idle, maxLanes: _max, onLaneChildReady, ...opts } = this.options;
    const s = new Snapshotter({ ...opts, onChildReady: (addrs) => onLaneChildReady?.(slot, addrs) });
    return { s, slot };
  }

  private closeIdle(): void {
    const idleMs = this.options.laneIdleMs ?? 30_000;
    const now = Date.now();
    for (const [key, lane] of this.lanes) {
      if (lane.busy > 0 || now - lane.lastUsed < idleMs) continue;
      this.closeLane(key);
    }
  }

  private closeLane(key: string): void {
    const lane = this.lanes.get(key);
    if (!lane) return;
    this.lanes.delete(key);
    void lane.s.close().finally(() => this.freeSlots.push(lane.slot));
  }
}

const DEFAULT_MAX_LANES = 8;

/**
 * The lanes to close before one more opens, so that at most `maxLanes` are open after it: idle
 * ones (no call in flight), least recently used first. Busy lanes are never chosen.
 */
export function idleLanesOverCap(lanes: ReadonlyMap<string, { busy: number; lastUsed: number }>, maxLanes: number): string[] {
  const over = lanes.size + 1 - maxLanes;
  if (over <= 0) return [];
  return [...lanes]
    .filter(([, l]) => l.busy === 0)
    .sort(([, a], [, b]) => a.lastUsed - b.lastUsed)
    .slice(0, over)
    .map(([key]) => key);
}

/** A VM's lane: the sorted set of images its call names. */
export function laneKey(requests: readonly SnapRequest[]): string {
  const images = new Set(requests.map((r) => `${r.pool}/${r.namespace ?? ''}/${r.image}`));
  return [...images].sort().join(',');
}
