import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { getPoolMirrorMode, isNotFound, openImage } from '../src/ceph';
import { faultPoint } from '../src/host/fault-points';
import type { IoCtx, SnapRequest } from '../src/ceph';
import { nowMs } from '../src/host/clock';
import { FailureType } from '../src/model/failures';
import type { InspectedDisk, MirrorRequest, MirrorResult, RbdLocation } from '../src/model/types';
import type { ActivityDeps } from './deps';
import { pruneDrPoints, recordDrPoints } from './dr-point';
import { during } from './step-error';

/*
 * DR mode (docs/dr.md): the checks before a DR run freezes anything, and, after its thaw, the
 * mirror snapshots that carry its snapshots to the DR site and the wait until they are there.
 */

/** How often the DR site is looked at: the RPO a run reports is late by at most this (plus one look). */
export const MIRROR_POLL_MS = 250;

/**
 * Bound on one look at one image on the DR site: a DR cluster that stopped answering (its monitors
 * and OSDs unreachable) must not stall the wait past waitMs nor its heartbeats; a look abandoned
 * finishes (and closes its image) on its own when the cluster answers again.
 */
export const MIRROR_LOOK_TIMEOUT_MS = 10_000;

/**
 * Bound on the check before the freeze that the DR site answers (a connect when the worker has no
 * session yet, then one read there). Below the DR session's connect timeout (10 s, host-deps), so
 * that a DR site that does not answer ends the check here, typed, in its first try: the check
 * runs inside inspect, a local activity whose tries share one 30 s budget.
 */
export const MIRROR_CHECK_TIMEOUT_MS = 8000;

/** Bound on reading the disks' mirroring through their snapshotter lane (reads, no lock involved). */
const MIRROR_STATE_TIMEOUT_MS = 10_000;

const lookup = (s: RbdLocation): SnapRequest => ({ pool: s.pool, namespace: s.namespace, image: s.image, snap: '' });

/**
 * Before anything is frozen: the DR site is configured and reachable, and every disk's image
 * mirrors in snapshot mode with this side primary. Disk targets `only`: the ones the run asked
 * for (default all). Fails MirrorUnavailable / MirrorNotEnabled, never retryable but for an error
 * opening the DR site's pool (a DR site that does not answer fails at the bound).
 */
export async function checkMirroring(deps: ActivityDeps, disks: InspectedDisk[], only?: readonly string[]): Promise<void> {
  const dr = deps.dr;
  if (!dr) {
    throw ApplicationFailure.nonRetryable('DR mode (target.mirror) needs a DR site, and this host has none configured (drCeph)', FailureType.MirrorUnavailable);
  }
  const rbd = disks.filter((d): d is InspectedDisk & { rbd: RbdLocation } => !!d.rbd && (!only || only.includes(d.target)));
  if (!rbd.length) return;
  const requests = rbd.map((d) => lookup(d.rbd));
  const states = await during('read the disks’ mirroring', () => deps.snapshotter.mirrorStates(requests, { timeoutMs: MIRROR_STATE_TIMEOUT_MS }), {
    type: FailureType.SourceCallTimeout,
    nonRetryable: false,
    keep: [FailureType.PermissionDenied],
  });
  const refused = rbd.flatMap((d, i) => {
    const s = states.get(requests[i]!)!;
    if (s.state === 'enabled' && s.mode === 'snapshot' && s.primary) return [];
    const what = s.state !== 'enabled' ? `mirroring ${s.state}` : s.mode !== 'snapshot' ? `mirrors in ${s.mode} mode` : 'not primary here (a copy, or demoted)';
    return [`${d.target} (${d.rbd.pool}/${d.rbd.image}): ${what}`];
  });
  if (refused.length) {
    throw ApplicationFailure.nonRetryable(
      `DR mode needs every disk's image to mirror in snapshot mode, primary here (rbd mirror image enable POOL/IMAGE snapshot): ${refused.join('; ')}`,
      FailureType.MirrorNotEnabled,
    );
  }
  const pools = new Map(rbd.map((d) => [`${d.rbd.pool}/${d.rbd.namespace ?? ''}`, d.rbd]));
  for (const [spec, at] of pools) {
    // A round trip to the DR site's OSDs, not only an open: a worker's session and its ioctx
    // outlive a DR site that stopped answering, and opening a cached ioctx asks nobody.
    const mode = await during(
      `read pool ${spec}'s mirroring on the DR site`,
      () => bounded(MIRROR_CHECK_TIMEOUT_MS, async () => getPoolMirrorMode(await dr.ioctx(at.pool, at.namespace))),
      { type: FailureType.MirrorUnavailable, nonRetryable: false },
    );
    if (mode === undefined) {
      throw ApplicationFailure.nonRetryable(`the DR site did not answer within ${MIRROR_CHECK_TIMEOUT_MS} ms (reading pool ${spec}'s mirroring there); nothing was frozen`, FailureType.MirrorUnavailable);
    }
    if (mode === 'disabled') {
      throw ApplicationFailure.nonRetryable(`the DR site's pool ${spec} does not mirror (rbd mirror pool enable ${at.pool} image, on the DR cluster): rbd-mirror would copy nothing there`, FailureType.MirrorNotEnabled);
    }
  }
}

type Seen =
  /** Not there yet (the DR site has no copy of the image yet, or the mirror snapshot is not begun). */
  | { state: 'absent' }
  | { state: 'copying'; objects: number }
  /** The run's snapshot is there, carried by the complete copy of mirror snapshot `carriedBy` (this run's, or a later one). */
  | { state: 'copied'; drMirrorSnapId: number; carriedBy: number };

/**
 * Where the DR site's copy of one disk stands. A complete copy of a mirror snapshot carries every
 * user snapshot its image had before it: once this run's mirror snapshot (`mirrorSnapId`), or a
 * later one, is complete there, the run's snapshot `snap` must be there too, under its name.
 */
async function lookAt(io: IoCtx, image: string, mirrorSnapId: number, snap: string): Promise<Seen> {
  let img;
  try {
    img = await openImage(io, image, { readOnly: true });
  } catch (err) {
    if (isNotFound(err)) return { state: 'absent' };
    throw err;
  }
  try {
    const snaps = await img.listSnaps();
    let seen: Seen = { state: 'absent' };
    let carrier: { drMirrorSnapId: number; carriedBy: number } | undefined;
    for (const s of snaps) {
      if (s.namespace !== 'mirror') continue;
      const ns = await img.getSnapMirrorNamespace(s.id);
      if (ns.primarySnapId < mirrorSnapId) continue;
      if (ns.complete && (!carrier || ns.primarySnapId > carrier.carriedBy)) carrier = { drMirrorSnapId: s.id, carriedBy: ns.primarySnapId };
      if (!ns.complete && ns.primarySnapId === mirrorSnapId) seen = { state: 'copying', objects: ns.lastCopiedObjectNumber };
    }
    if (!carrier) return seen;
    if (!snaps.some((u) => u.namespace === 'user' && u.name === snap)) {
      throw ApplicationFailure.nonRetryable(
        `the DR site's copy of ${image} is complete up to mirror snapshot ${carrier.carriedBy} without snapshot ${snap}: it was removed here before rbd-mirror copied it`,
        FailureType.MirrorNotReplicated,
      );
    }
    return { state: 'copied', ...carrier };
  } finally {
    await img.close();
  }
}

/**
 * DR mode, right after the thaw: a mirror snapshot of every disk (rbd_mirror_image_create_snapshot
 * through the VM's snapshotter lane, bounded like a snapshot: it goes through the lock owner), then
 * a wait until the DR site has a complete copy of each, looking every MIRROR_POLL_MS, at most
 * `waitMs`, heartbeating where each disk stands. rbd-mirror copies the user snapshots an image
 * has before a mirror snapshot with it, so the run's own snapshot — taken in the window — arrives
 * under its name: the DR point is the quiesced snapshot itself, and the window holds no mirror
 * snapshot (docs/dr.md#where-the-mirror-snapshot-is-taken). The RPO runs from the point in time (the
 * freeze's start) to the look that saw the last copy. Never claims a copy it did not see: a
 * wait that runs out, or a complete copy without the run's snapshot, fails MirrorNotReplicated.
 */
export function mirrorToDrSite(deps: ActivityDeps) {
  return async function mirrorToDrSite(req: MirrorRequest): Promise<MirrorResult> {
    const dr = deps.dr;
    if (!dr) throw ApplicationFailure.nonRetryable('DR mode needs a DR site, and this host has none configured (drCeph)', FailureType.MirrorUnavailable);
    const ctx = Context.current();
    const startedAt = nowMs();
    const site = await during('read the DR site’s fsid', () => dr.fsid(), { type: FailureType.MirrorUnavailable, nonRetryable: false });
    const requests = req.disks.map((d) => lookup(d.source));
    // The record first: a mirror snapshot carries the image's metadata as it is when it is taken.
    await recordDrPoints(deps, req);
    await faultPoint('mirror:before-snapshots');
    const taken = await during('take mirror snapshots', () => deps.snapshotter.createMirrorSnaps(requests, { timeoutMs: req.snapshotTimeoutMs }), {
      type: FailureType.MirrorNotReplicated,
      nonRetryable: true,
    });
    if (taken.failed.length || taken.timedOut || taken.mayCompleteLate.length || taken.notSent.length) {
      const what = taken.failed.map((f) => `${f.request.pool}/${f.request.image}: ${f.error.message}`);
      if (taken.timedOut) what.push(`no answer within ${req.snapshotTimeoutMs} ms (image lock owner unresponsive or cluster unavailable)`);
      // Retryable: the guest is thawed, and a mirror snapshot that lands late is one more of rbd-mirror's.
      throw ApplicationFailure.retryable(`mirror snapshot failed: ${what.join('; ')}`, FailureType.MirrorNotReplicated);
    }
    const disks = req.disks.map((d, i) => ({ ...d, mirrorSnapId: taken.snapIds.get(requests[i]!)! }));
    const copied = new Map<string, { drMirrorSnapId: number; carriedBy: number; at: number }>();
    const where: Record<string, string> = {};
    // A look the bound gave up on still holds an addon thread inside librados until the DR site
    // answers; the next round waits on that same look, so a silent site costs one thread per disk.
    const inFlight = new Map<string, Promise<Seen>>();
    const look = (d: (typeof disks)[number]): Promise<Seen> => {
      let p = inFlight.get(d.target);
      if (!p) {
        p = (async () => {
          const io = await during('open the DR site’s pool', () => dr.ioctx(d.source.pool, d.source.namespace), { type: FailureType.MirrorUnavailable, nonRetryable: false });
          return lookAt(io, d.source.image, d.mirrorSnapId, d.snap);
        })();
        const done = () => inFlight.delete(d.target);
        p.then(done, done);
        inFlight.set(d.target, p);
      }
      return p;
    };
    /** Looks in a row the DR site did not answer: a wait that ends on one is the site's silence, not a slow copy. */
    let unanswered = 0;
    for (;;) {
      for (const d of disks) {
        if (copied.has(d.target)) continue;
        const remaining = req.waitMs - (nowMs() - startedAt);
        const seen = await during(`look at ${d.source.image} on the DR site`, () => bounded(Math.max(1000, Math.min(MIRROR_LOOK_TIMEOUT_MS, remaining)), () => look(d)));
        if (seen === undefined) {
          unanswered++;
          where[d.target] = 'DR site not answering';
          break; // the rest of this round would wait on the same silent cluster
        }
        unanswered = 0;
        if (seen.state === 'copied') copied.set(d.target, { drMirrorSnapId: seen.drMirrorSnapId, carriedBy: seen.carriedBy, at: nowMs() });
        where[d.target] = seen.state === 'copying' ? `copying (${seen.objects} objects)` : seen.state;
      }
      const waitedMs = nowMs() - startedAt;
      ctx.heartbeat({ copied: copied.size, of: disks.length, waitedMs: Math.round(waitedMs), disks: where });
      if (copied.size === disks.length) break;
      if (waitedMs > req.waitMs) {
        const left = disks.filter((d) => !copied.has(d.target)).map((d) => `${d.target}: ${where[d.target] ?? 'not looked at'}`);
        if (unanswered > 0) {
          throw ApplicationFailure.nonRetryable(
            `the DR site did not answer: its last ${unanswered} look(s) got no answer within their bound (${MIRROR_LOOK_TIMEOUT_MS} ms at most), and the wait ran out after ${Math.round(waitedMs)} ms (target.mirror.waitMs ${req.waitMs}); no complete copy of this run's snapshots seen there: ${left.join('; ')}`,
            FailureType.MirrorUnavailable,
          );
        }
        throw ApplicationFailure.nonRetryable(
          `the DR site has no complete copy of this run's snapshots after ${Math.round(waitedMs)} ms (target.mirror.waitMs ${req.waitMs}): ${left.join('; ')}`,
          FailureType.MirrorNotReplicated,
        );
      }
      await sleep(MIRROR_POLL_MS, ctx.cancellationSignal);
    }
    await pruneDrPoints(deps, req);
    const lastAt = Math.max(...[...copied.values()].map((c) => c.at));
    const rpoMs = lastAt - req.pointAt;
    deps.metrics.mirrorRpo.observe(rpoMs / 1000);
    return {
      site,
      rpoMs: Math.round(rpoMs),
      waitedMs: Math.round(lastAt - startedAt),
      disks: disks.map((d) => {
        const c = copied.get(d.target)!;
        return { target: d.target, snapshot: d.snap, mirrorSnapId: d.mirrorSnapId, carriedBy: c.carriedBy, drMirrorSnapId: c.drMirrorSnapId, copiedAfterMs: Math.round(c.at - req.pointAt) };
      }),
    };
  };
}

/** `fn`'s result, or undefined when it has not answered within `ms` (it is left to finish on its own). */
async function bounded<T>(ms: number, fn: () => Promise<T>): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  const call = fn();
  call.catch(() => undefined); // an abandoned look's failure is nobody's
  try {
    return await Promise.race([call, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Rejects with the signal's reason when the activity is cancelled. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason as Error);
    const t = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal.reason as Error);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
