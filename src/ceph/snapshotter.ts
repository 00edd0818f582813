import { fork, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { ConnectOptions, RadosCluster } from './cluster';
import { RbdError } from './errors';
import type { FromChild, MirrorState, ReplyValue, SnapOp, SnapRequest, ToChild, WireError } from './snapshotter-protocol';

export type { MirrorState, SnapRequest } from './snapshotter-protocol';

/*
 * Bounded snapshot calls (Ceph 16 hazard: unresponsive lock owner).
 *
 * When a VM's qemu holds an image's exclusive lock and stops answering, rbd_snap_create blocks
 * ~29 s and then breaks qemu's lock and blocklists it: the live guest's disk I/O fails. A thread
 * inside librbd cannot be cancelled, so snapshots of live disks run in a long-lived child process
 * with its own cluster connection. When a batch outlives its deadline the child is SIGKILLed:
 * its librados session disappears before anything breaks the lock, and the next call forks a
 * new child. A request that was sent but not answered may still be carried out later by the
 * lock owner when it wakes up (a "late" snapshot): the result lists those requests, and the
 * caller must look for and remove such snapshots later (removeSnaps).
 */

export interface SnapshotterOptions extends ConnectOptions {
  /** Limit for forking the child and connecting it (default 15 s). */
  startTimeoutMs?: number;
  /** The child closes an image handle this long after its last use (default 5 s). */
  idleCloseMs?: number;
  /**
   * A connection (in this process) used to blocklist a SIGKILLed child's session right after it
   * died (rados_blocklist_add). Without it, the dead child's watches on the image headers stay
   * until osd_client_watch_timeout (30 s), and header updates on those images (the late
   * snapshot, its removal) wait for them. Harmless to anyone else: the session is dead.
   */
  evictWith?: RadosCluster | (() => Promise<RadosCluster>);
  /** Called with each child's librados address once it is connected (for fencing after a crash). */
  onChildReady?: (addrs: string) => void;
}

export interface BoundOptions {
  /** Deadline for the whole batch, including a child (re)start when none is running. */
  timeoutMs: number;
}

export interface SnapFailure {
  request: SnapRequest;
  error: RbdError;
}

export interface CreateSnapsResult {
  /** Confirmed created. */
  created: SnapRequest[];
  /** Per answered request: ms from sending it to its reply (the requests run in parallel). */
  replyMs: Map<SnapRequest, number>;
  /** Answered with an error (nothing created). */
  failed: SnapFailure[];
  /** Sent but unanswered when the deadline hit or the child died: may be created late. */
  mayCompleteLate: SnapRequest[];
  /** Not sent: the child was not ready before the deadline. Nothing will happen for these. */
  notSent: SnapRequest[];
  timedOut: boolean;
}

/** As {@link CreateSnapsResult}, for mirror snapshots: librbd names them, the result has their ids. */
export interface CreateMirrorSnapsResult extends CreateSnapsResult {
  /** Per created request: the new mirror snapshot's id on its image. */
  snapIds: Map<SnapRequest, number>;
}

export interface SetUpResult {
  /** Answered without error, with the op's reply value (exclusive-lock: whether it was added). */
  done: Map<SnapRequest, ReplyValue | undefined>;
  failed: SnapFailure[];
  mayCompleteLate: SnapRequest[];
  notSent: SnapRequest[];
  timedOut: boolean;
}

export interface MetadataWriteResult {
  /** Answered without error (a removal also when the key was not there). */
  done: SnapRequest[];
  /** Per answered request: ms from sending it to its reply (the requests run in parallel). */
  replyMs: Map<SnapRequest, number>;
  failed: SnapFailure[];
  /** Sent but unanswered: the lock owner may still carry the write out. */
  mayCompleteLate: SnapRequest[];
  notSent: SnapRequest[];
  timedOut: boolean;
}

export interface RemoveSnapsResult {
  removed: SnapRequest[];
  /** ENOENT: there was no such snapshot. */
  absent: SnapRequest[];
  failed: SnapFailure[];
  mayCompleteLate: SnapRequest[];
  notSent: SnapRequest[];
  timedOut: boolean;
}

type Reply = { ok: true; value?: ReplyValue } | { ok: false; error: RbdError };

interface Child {
  proc: ChildProcess;
  addrs?: string;
  ready: Promise<void>;
  replies: Map<number, (r: Reply | undefined) => void>;
  exited: Promise<void>;
  alive: boolean;
}

const CHILD_GONE = 'snapshotter-child';
const EVICT_GIVE_UP_MS = 35_000;

function fromWire(e: WireError): RbdError {
  return new RbdError(e.errno, e.call);
}

/** The child entry and how to run it: compiled .js directly, .ts through tsx's require hook. */
function childCommand(): { file: string; execArgv: string[] } {
  const ext = path.extname(__filename);
  const file = path.join(__dirname, `snapshotter-child${ext}`);
  if (ext !== '.ts') return { file, execArgv: [] };
  return { file, execArgv: ['--require', createRequire(__filename).resolve('tsx/cjs')] };
}

export class Snapshotter {
  private child: Child | undefined;
  private nextId = 1;
  private evicting: Promise<void> = Promise.resolve();

  constructor(private readonly options: SnapshotterOptions) {}

  /** The child's pid, when one is running (for tests and logs). */
  get pid(): number | undefined {
    return this.child?.alive ? this.child.proc.pid : undefined;
  }

  /** Forks and connects the child now, so that the first bounded call does not pay for it. */
  async start(): Promise<void> {
    await this.ensureChild().ready;
  }

  /**
   * rbd_open of each request's image in the child, ahead of a freeze, so that createSnaps inside
   * the freeze window does not pay for it. Bounded like the other calls; `snap` is ignored.
   */
  async prepare(requests: SnapRequest[], o: BoundOptions): Promise<{ opened: SnapRequest[]; failed: SnapFailure[]; timedOut: boolean }> {
    const r = await this.runBatch('open', requests, o.timeoutMs);
    return {
      opened: r.answered.filter((a) => a.reply.ok).map((a) => a.request),
      failed: r.answered.flatMap((a) => (a.reply.ok ? [] : [{ request: a.request, error: a.reply.error }])),
      timedOut: r.timedOut,
    };
  }

  /**
   * rbd_snap_create for each request (in parallel, in the child), bounded by `timeoutMs`.
   * Never rejects for a slow or failing snapshot (see the result); rejects only when the child
   * cannot start (e.g. rados_connect failed).
   */
  async createSnaps(requests: SnapRequest[], o: BoundOptions): Promise<CreateSnapsResult> {
    const r = await this.runBatch('create', requests, o.timeoutMs);
    return {
      created: r.answered.filter((a) => a.reply.ok).map((a) => a.request),
      replyMs: new Map(r.answered.map((a) => [a.request, a.ms])),
      failed: r.answered.flatMap((a) => (a.reply.ok ? [] : [{ request: a.request, error: a.reply.error }])),
      mayCompleteLate: r.unanswered,
      notSent: r.notSent,
      timedOut: r.timedOut,
    };
  }

  /**
   * rbd_mirror_image_create_snapshot for each request's image (`snap` is ignored), in parallel, in
   * the child, bounded like {@link createSnaps}: a mirror snapshot of a live image goes through
   * its lock owner as a snapshot does. A late one is a mirror snapshot like any other: rbd-mirror
   * copies it and librbd prunes it in its turn (rbd_mirroring_max_mirroring_snapshots).
   */
  async createMirrorSnaps(requests: SnapRequest[], o: BoundOptions): Promise<CreateMirrorSnapsResult> {
    const r = await this.runBatch('mirror-snap', requests, o.timeoutMs);
    const created = r.answered.filter((a) => a.reply.ok);
    return {
      created: created.map((a) => a.request),
      snapIds: new Map(created.map((a) => [a.request, (a.reply as { value: number }).value])),
      replyMs: new Map(r.answered.map((a) => [a.request, a.ms])),
      failed: r.answered.flatMap((a) => (a.reply.ok ? [] : [{ request: a.request, error: a.reply.error }])),
      mayCompleteLate: r.unanswered,
      notSent: r.notSent,
      timedOut: r.timedOut,
    };
  }

  /**
   * rbd_mirror_image_get_info (+ rbd_mirror_image_get_mode when enabled) for each request's image,
   * bounded; rejects with the first error, or ETIMEDOUT when the deadline passes.
   */
  async mirrorStates(requests: SnapRequest[], o: BoundOptions): Promise<Map<SnapRequest, MirrorState>> {
    const r = await this.runBatch('mirror-state', requests, o.timeoutMs);
    const out = new Map<SnapRequest, MirrorState>();
    for (const a of r.answered) {
      if (!a.reply.ok) throw a.reply.error;
      out.set(a.request, a.reply.value as MirrorState);
    }
    if (out.size < requests.length) throw new RbdError(r.timedOut ? 110 : 5, 'rbd_mirror_image_get_info');
    return out;
  }

  /**
   * What an operator sets up once per image for snapshot-mode mirroring, each bounded like a
   * snapshot (on a live image they go through its lock owner): `exclusive-lock` enables that
   * feature when missing (rbd_update_features; the reply says whether it was added),
   * `mirror-enable` is rbd_mirror_image_enable2 in snapshot mode (which takes the first mirror
   * snapshot), `mirror-disable` rbd_mirror_image_disable (which removes the mirror snapshots).
   */
  async setUpMirroring(op: 'exclusive-lock' | 'mirror-enable' | 'mirror-disable', requests: SnapRequest[], o: BoundOptions): Promise<SetUpResult> {
    const r = await this.runBatch(op, requests, o.timeoutMs);
    return {
      done: new Map(r.answered.flatMap((a) => (a.reply.ok ? [[a.request, a.reply.value] as const] : []))),
      failed: r.answered.flatMap((a) => (a.reply.ok ? [] : [{ request: a.request, error: a.reply.error }])),
      mayCompleteLate: r.unanswered,
      notSent: r.notSent,
      timedOut: r.timedOut,
    };
  }

  /**
   * rbd_metadata_set of each request's `meta` (key and value) on its image, in parallel, in the
   * child, bounded like {@link createSnaps}: on a live image the write goes through its lock owner
   * (the VM's QEMU), so an owner that does not answer is the snapshot's hazard.
   */
  async setMetadata(requests: SnapRequest[], o: BoundOptions): Promise<MetadataWriteResult> {
    return this.writeMetadata('meta-set', requests, o);
  }

  /** rbd_metadata_remove of each request's `meta.key`, bounded as {@link setMetadata}; ENOENT counts as done. */
  async removeMetadata(requests: SnapRequest[], o: BoundOptions): Promise<MetadataWriteResult> {
    return this.writeMetadata('meta-remove', requests, o);
  }

  /**
   * rbd_metadata_list of each request's image: the keys that start with `prefix`. A read (no lock
   * owner involved), bounded; rejects with the first error, or ETIMEDOUT when the deadline passes.
   */
  async metadataKeys(requests: SnapRequest[], prefix: string, o: BoundOptions): Promise<Map<SnapRequest, string[]>> {
    return this.readAll('meta-keys', requests.map((r) => ({ ...r, meta: { key: prefix } })), requests, 'rbd_metadata_list', o);
  }

  /** rbd_snap_list of each request's image: its user snapshots' names. Bounded and rejecting as {@link metadataKeys}. */
  async userSnapNames(requests: SnapRequest[], o: BoundOptions): Promise<Map<SnapRequest, string[]>> {
    return this.readAll('user-snaps', requests, requests, 'rbd_snap_list', o);
  }

  /** rbd_snap_remove for each request, bounded; ENOENT counts as `absent`. */
  async removeSnaps(requests: SnapRequest[], o: BoundOptions): Promise<RemoveSnapsResult> {
    const r = await this.runBatch('remove', requests, o.timeoutMs);
    const isAbsent = (rep: Reply): boolean => !rep.ok && rep.error.code === 'ENOENT';
    return {
      removed: r.answered.filter((a) => a.reply.ok).map((a) => a.request),
      absent: r.answered.filter((a) => isAbsent(a.reply)).map((a) => a.request),
      failed: r.answered.flatMap((a) =>
        a.reply.ok || isAbsent(a.reply) ? [] : [{ request: a.request, error: a.reply.error }],
      ),
      mayCompleteLate: r.unanswered,
      notSent: r.notSent,
      timedOut: r.timedOut,
    };
  }

  private async writeMetadata(op: 'meta-set' | 'meta-remove', requests: SnapRequest[], o: BoundOptions): Promise<MetadataWriteResult> {
    const r = await this.runBatch(op, requests, o.timeoutMs);
    const ok = (rep: Reply): boolean => rep.ok || (op === 'meta-remove' && rep.error.code === 'ENOENT');
    return {
      done: r.answered.filter((a) => ok(a.reply)).map((a) => a.request),
      replyMs: new Map(r.answered.map((a) => [a.request, a.ms])),
      failed: r.answered.flatMap((a) => (a.reply.ok || ok(a.reply) ? [] : [{ request: a.request, error: a.reply.error }])),
      mayCompleteLate: r.unanswered,
      notSent: r.notSent,
      timedOut: r.timedOut,
    };
  }

  /** `sent[i]` is `asked[i]` as it goes over the wire; the answers are keyed by `asked`. */
  private async readAll(op: SnapOp, sent: SnapRequest[], asked: SnapRequest[], call: string, o: BoundOptions): Promise<Map<SnapRequest, string[]>> {
    const r = await this.runBatch(op, sent, o.timeoutMs);
    const out = new Map<SnapRequest, string[]>();
    for (const a of r.answered) {
      if (!a.reply.ok) throw a.reply.error;
      out.set(asked[sent.indexOf(a.request)]!, a.reply.value as string[]);
    }
    if (out.size < asked.length) throw new RbdError(r.timedOut ? 110 : 5, call);
    return out;
  }

  /** rbd_snap_exists, bounded; rejects with RbdError ETIMEDOUT when the deadline passes. */
  async snapExists(request: SnapRequest, o: BoundOptions): Promise<boolean> {
    const r = await this.runBatch('exists', [request], o.timeoutMs);
    const a = r.answered[0];
    if (!a) throw new RbdError(r.timedOut ? 110 : 5, 'rbd_snap_exists');
    if (!a.reply.ok) throw a.reply.error;
    return a.reply.value === true;
  }

  /** One IPC round trip to the child (no Ceph call): measures the channel's overhead. */
  async ping(o: BoundOptions): Promise<void> {
    const r = await this.runBatch('ping', [{ pool: '', image: '', snap: '' }], o.timeoutMs);
    if (!r.answered[0]) throw new RbdError(r.timedOut ? 110 : 5, CHILD_GONE);
  }

  /** Disconnects the child, which then shuts its connection down and exits. */
  async close(): Promise<void> {
    await Promise.race([this.evicting, sleep(5000)]);
    const c = this.child;
    this.child = undefined;
    if (!c?.alive) return;
    c.proc.ref(); // keep the process alive until the child has exited
    c.proc.disconnect();
    let timer: NodeJS.Timeout | undefined;
    const exited = await Promise.race([
      c.exited.then(() => true),
      new Promise<false>((resolve) => { timer = setTimeout(() => resolve(false), 5000); }),
    ]);
    clearTimeout(timer);
    if (!exited) this.kill(c);
  }

  private async runBatch(op: SnapOp, requests: SnapRequest[], timeoutMs: number) {
    const answered: { request: SnapRequest; reply: Reply; ms: number }[] = [];
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs);
    });
    // A killed child's session is fenced before anything touches its images — but within this
    // call's bound: a blocklist command that hangs (monitor quorum lost) must not wedge the call.
    const fenced = await Promise.race([this.evicting.then(() => 'fenced' as const), deadline]);
    if (fenced === 'timeout') {
      clearTimeout(timer);
      return { answered, unanswered: [] as SnapRequest[], notSent: requests, timedOut: true };
    }
    const c = this.ensureChild();
    this.ref(c);
    try {
      // A child that cannot start (bad conf, auth) rejects here with its RbdError.
      const ready = await Promise.race([c.ready.then(() => 'ready' as const), deadline]);
      if (ready === 'timeout') {
        this.abandon(c);
        return { answered, unanswered: [], notSent: requests, timedOut: true };
      }
      const pending = new Set<SnapRequest>(requests);
      const all = Promise.all(
        requests.map(async (request) => {
          const sent = performance.now();
          const reply = await this.send(c, op, request);
          if (reply) {
            answered.push({ request, reply, ms: performance.now() - sent });
            pending.delete(request);
          }
        }),
      );
      const outcome = await Promise.race([all.then(() => 'done' as const), deadline]);
      if (outcome === 'timeout') this.abandon(c);
      return { answered, unanswered: [...pending], notSent: [], timedOut: outcome === 'timeout' };
    } finally {
      clearTimeout(timer);
      this.unrefIfIdle(c);
    }
  }

  /** Sends one request; resolves undefined when the child dies before answering. */
  private send(c: Child, op: SnapOp, req: SnapRequest): Promise<Reply | undefined> {
    const id = this.nextId++;
    return new Promise((resolve) => {
      if (!c.alive) return resolve(undefined);
      c.replies.set(id, resolve);
      const m: ToChild = { type: 'request', id, op, req };
      c.proc.send(m);
    });
  }

  private ensureChild(): Child {
    if (this.child?.alive) return this.child;
    const { file, execArgv } = childCommand();
    const proc = fork(file, [], { execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'json' });
    const replies = new Map<number, (r: Reply | undefined) => void>();
    let onReady: () => void = () => {};
    let onFatal: (e: Error) => void = () => {};
    const ready = new Promise<void>((resolve, reject) => {
      onReady = resolve;
      onFatal = reject;
    });
    ready.catch(() => {}); // observed by runBatch/start
    const child: Child = { proc, ready, replies, alive: true, exited: Promise.resolve() };
    child.exited = new Promise<void>((resolve) => {
      proc.once('exit', () => {
        child.alive = false;
        onFatal(new RbdError(5, CHILD_GONE));
        for (const r of replies.values()) r(undefined);
        replies.clear();
        if (this.child === child) this.child = undefined;
        resolve();
      });
    });
    proc.on('message', (m: FromChild) => {
      if (m.type === 'ready') {
        child.addrs = m.addrs;
        if (m.addrs) this.options.onChildReady?.(m.addrs);
        onReady();
      }
      else if (m.type === 'fatal') {
        onFatal(fromWire(m.error));
        this.kill(child);
      } else {
        const r = replies.get(m.id);
        replies.delete(m.id);
        r?.(m.ok ? { ok: true, value: m.value } : { ok: false, error: fromWire(m.error) });
      }
    });
    proc.on('error', () => this.kill(child));
    const startTimeout = setTimeout(() => {
      onFatal(new RbdError(110, CHILD_GONE));
      this.kill(child);
    }, this.options.startTimeoutMs ?? 15_000);
    ready.then(() => clearTimeout(startTimeout), () => clearTimeout(startTimeout));
    const { startTimeoutMs: _ignored, idleCloseMs = 5000, evictWith: _cluster, onChildReady: _ready, ...connect } = this.options;
    const init: ToChild = { type: 'init', options: connect, idleCloseMs };
    proc.send(init);
    this.child = child;
    return child;
  }

  /** Sessions of killed children that were blocklisted, and errors doing so (for logs/tests). */
  readonly evictions: { addrs: string; error?: unknown }[] = [];

  /**
   * SIGKILL: the child's librados session goes with it, before it can break anyone's lock.
   * Then, with `evictWith`, fence the dead session so its watches go at once — in the
   * background, so the bounded call returns now; this Snapshotter's next batch waits for it
   * (within that batch's own bound).
   */
  private abandon(c: Child): void {
    this.kill(c);
    const evictWith = this.options.evictWith;
    if (!evictWith) return;
    const previous = this.evicting;
    this.evicting = (async () => {
      await previous;
      const exited = await Promise.race([c.exited.then(() => true), sleep(2000).then(() => false)]);
      const addrs = c.addrs;
      if (!exited || !addrs) return;
      const cluster = typeof evictWith === 'function' ? await evictWith().catch(() => undefined) : evictWith;
      if (!cluster) return;
      // Past osd_client_watch_timeout (30 s) the dead session's watches are gone anyway: a
      // blocklist command that hangs longer (no monitor quorum) stops gating this lane.
      const outcome = await Promise.race([
        cluster.addToBlocklist(addrs, 3600).then(() => undefined, (error: unknown) => ({ error })),
        sleep(EVICT_GIVE_UP_MS).then(() => ({ error: new RbdError(110, 'rados_blocklist_add') })),
      ]);
      this.evictions.push({ addrs, ...outcome });
    })();
  }

  /** Resolves when the blocklisting of killed children (evictWith) has finished. */
  settled(): Promise<void> {
    return this.evicting;
  }

  private kill(c: Child): void {
    if (this.child === c) this.child = undefined;
    if (c.alive) c.proc.kill('SIGKILL');
  }

  private ref(c: Child): void {
    c.proc.ref();
    c.proc.channel?.ref();
  }

  private unrefIfIdle(c: Child): void {
    if (c.replies.size > 0 || !c.alive) return;
    c.proc.unref();
    c.proc.channel?.unref();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
