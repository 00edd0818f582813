import { ApplicationFailure } from '@temporalio/common';
import { constants } from 'node:os';
import { laneKey, RbdError } from '../src/ceph';
import type { MetadataWriteResult, SnapRequest } from '../src/ceph';
import { monoMs } from '../src/host/clock';
import { restoreKeyFix } from '../src/host/restore-key';
import { DR_POINT_PREFIX, drPointKey, encodeDrPoint, snapOfDrPointKey } from '../src/model/dr-point';
import type { DrPoint } from '../src/model/dr-point';
import { FailureType } from '../src/model/failures';
import { RESTORE_POINT_VERSION } from '../src/model/restore-point';
import type { MirrorRequest, RbdLocation } from '../src/model/types';
import { restorePointMac } from '../src/restore/record-mac';
import type { ActivityDeps } from './deps';
import { isNoDomain } from '../src/libvirt';
import { during, StepError } from './step-error';
import type { StepFailure } from './step-error';

/** Retryable: the guest is thawed, and a write that lands late is the same record. */
const RECORD_FAILED: StepFailure = { type: FailureType.MirrorNotReplicated, nonRetryable: false };

const onImage = (s: RbdLocation): SnapRequest => ({ pool: s.pool, namespace: s.namespace, image: s.image, snap: '' });

/**
 * DR mode, before the mirror snapshots: the DR point record (src/model/dr-point.ts) on every disk's
 * image, so the mirror snapshots carry it to the DR site with the run's snapshot; and, beside it,
 * the records of snapshots the image no longer has are removed, which the same mirror snapshots
 * carry too (rbd-mirror makes the copy's metadata the primary's, removals included). The domain
 * XML is read here (read-only connection, no secrets) and goes straight to Ceph. The writes go
 * through the VM's snapshotter lane, whose child has the images open since the window: the image
 * is live, the write goes through its lock owner (the VM's QEMU), so it is bounded like a snapshot
 * (`snapshotTimeoutMs`, the child SIGKILLed past it). This step is part of the RPO. Signed with the
 * fleet's restore key; without one it is written unsigned and `dr-restore` refuses it, as
 * `restore --as` does.
 */
export async function recordDrPoints(deps: ActivityDeps, req: MirrorRequest): Promise<void> {
  const r = req.record;
  if (!r || !req.disks.length) return;
  const snap = req.disks[0]!.snap;
  const lv = await deps.libvirtReadOnly();
  let dom;
  try {
    dom = await lv.lookupDomainByUuid(r.domain.uuid);
  } catch (err) {
    // Migrated away since the window: its definition is not read here. The DR point is on the DR
    // site all the same, without a record dr-restore could use; the run says nothing more of it.
    if (!isNoDomain(err)) throw new StepError(`look up domain ${r.domain.uuid}`, err);
    deps.log.warn('DR point record not written: the domain is no longer defined on this host (migrated?)', { domain: r.domain.name, snap });
    return;
  }
  const domainXml = await during('read domain XML', () => lv.getDomainXml(dom, { inactive: true }));
  const record: Omit<DrPoint, 'v' | 'mac'> = {
    ...r,
    recordedAt: new Date().toISOString(),
    snap,
    disks: req.disks.map((d) => {
      const source = `${d.source.pool}/${d.source.namespace ? `${d.source.namespace}/` : ''}${d.source.image}`;
      return { target: d.target, image: `${source}@${d.snap}`, source };
    }),
    domainXml,
  };
  const key = deps.restoreKey ? await deps.restoreKey() : undefined;
  if (!key?.ok) {
    deps.log.warn('DR point record written without a MAC: dr-restore will refuse it', { why: key?.why ?? 'no restore key configured', fix: restoreKeyFix(key?.file ?? '/etc/vmsnap/restore.key') });
  }
  const value = encodeDrPoint(key?.ok ? { ...record, mac: restorePointMac({ v: RESTORE_POINT_VERSION, ...record }, key.key) } : record);
  for (const d of req.disks) {
    if (d.snap !== snap) throw ApplicationFailure.nonRetryable(`the run's snapshots have two names (${snap}, ${d.snap})`, FailureType.MirrorNotReplicated);
  }
  const images = req.disks.map((d) => onImage(d.source));
  const lane = laneKey(images);
  const bound = { timeoutMs: req.snapshotTimeoutMs, lane };
  const startedAt = monoMs();
  // The prune never rejects; it runs beside the write so that the record step costs one lock-owner round trip, not two.
  const pruning = pruneStale(deps, images, bound);
  let written: MetadataWriteResult;
  try {
    written = await during('write the DR point records', () => deps.snapshotter.setMetadata(images.map((q) => ({ ...q, meta: { key: drPointKey(snap), value } })), bound), RECORD_FAILED);
  } finally {
    await pruning;
  }
  const failed = written.failed[0];
  if (failed) throw new StepError(`write the DR point record on ${failed.request.image}`, failed.error, RECORD_FAILED);
  const unanswered = [...written.mayCompleteLate, ...written.notSent];
  if (written.timedOut || unanswered.length) {
    throw new StepError(
      `write the DR point record on ${unanswered.map((q) => q.image).join(', ')}: no answer within ${req.snapshotTimeoutMs} ms (the image's lock owner, its VM's QEMU, does not answer, or the cluster is unavailable)`,
      new RbdError(constants.errno.ETIMEDOUT, 'rbd_metadata_set'),
      RECORD_FAILED,
    );
  }
  deps.log.info('DR point records written', {
    domain: r.domain.name,
    snap,
    ms: Math.round(monoMs() - startedAt),
    perDiskMs: Object.fromEntries(written.done.map((q) => [q.image, Math.round(written.replyMs.get(q)!)])),
    pruned: (await pruning).length,
  });
}

/**
 * After the wait, best effort: records of snapshots removed here while the run waited (the record
 * step pruned the rest); the next DR run's mirror snapshots carry these removals to the DR site.
 */
export async function pruneDrPoints(deps: ActivityDeps, req: MirrorRequest): Promise<void> {
  if (!req.record || !req.disks.length) return;
  const images = req.disks.map((d) => onImage(d.source));
  await pruneStale(deps, images, { timeoutMs: req.snapshotTimeoutMs, lane: laneKey(images) });
}

/**
 * Removes, on each image, the DR point records whose snapshot the image no longer has (finalize
 * removed it, or retention), through the VM's lane and bounded like the write. Never rejects: a
 * record left is harmless (dr-restore skips a point whose snapshot is gone) and the next DR run
 * tries again. Returns the keys removed.
 */
async function pruneStale(deps: ActivityDeps, images: SnapRequest[], bound: { timeoutMs: number; lane: string }): Promise<string[]> {
  try {
    const [keys, snaps] = await Promise.all([deps.snapshotter.metadataKeys(images, DR_POINT_PREFIX, bound), deps.snapshotter.userSnapNames(images, bound)]);
    const stale = images.flatMap((q) => {
      const have = new Set(snaps.get(q));
      return keys.get(q)!.flatMap((k): SnapRequest[] => {
        const s = snapOfDrPointKey(k);
        return s !== null && !have.has(s) ? [{ ...q, meta: { key: k } }] : [];
      });
    });
    if (!stale.length) return [];
    const r = await deps.snapshotter.removeMetadata(stale, bound);
    const left = [...r.failed.map((f) => `${f.request.image} ${f.request.meta!.key}: ${f.error.message}`), ...[...r.mayCompleteLate, ...r.notSent].map((q) => `${q.image} ${q.meta!.key}: no answer within ${bound.timeoutMs} ms`)];
    if (left.length) deps.log.warn('stale DR point records left', { left });
    return r.done.map((q) => `${q.image} ${q.meta!.key}`);
  } catch (err) {
    deps.log.warn('stale DR point records left', { images: images.map((q) => q.image), error: (err as Error).message });
    return [];
  }
}
