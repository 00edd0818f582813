import { ApplicationFailure } from '@temporalio/common';
import { readImageIfExists } from '../src/ceph';
import { removeImageMetaCli, setImageMetaCli } from '../src/ceph/mirror-cli';
import { restoreKeyFix } from '../src/host/restore-key';
import { drPointKey, encodeDrPoint, snapOfDrPointKey } from '../src/model/dr-point';
import type { DrPoint } from '../src/model/dr-point';
import { FailureType } from '../src/model/failures';
import { RESTORE_POINT_VERSION } from '../src/model/restore-point';
import type { MirrorRequest } from '../src/model/types';
import { restorePointMac } from '../src/restore/record-mac';
import type { ActivityDeps } from './deps';
import { isNoDomain } from '../src/libvirt';
import { during, StepError } from './step-error';

/**
 * DR mode, before the mirror snapshots: the DR point record (src/model/dr-point.ts) on every disk's
 * image, so the mirror snapshots carry it to the DR site with the run's snapshot. The domain XML is
 * read here (read-only connection, no secrets) and goes straight to Ceph. The image is live (its
 * QEMU owns the exclusive lock, through which a metadata write goes), so each write is an `rbd`
 * process SIGKILLed at 10 s, like the omap calls, all disks at once. Signed with the fleet's restore key; without one it is written unsigned
 * and `dr-restore` refuses it, as `restore --as` does.
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
  await Promise.all(
    req.disks.map((d) =>
      during(`write the DR point record on ${d.source.image}`, () => setImageMetaCli(deps.radosCli, d.source, drPointKey(snap), value), {
        type: FailureType.MirrorNotReplicated,
        nonRetryable: false,
      }),
    ),
  );
}

/** After the wait, best effort: each image loses the records of snapshots it no longer has (removed by retention or finalize). */
export async function pruneDrPoints(deps: ActivityDeps, req: MirrorRequest): Promise<void> {
  if (!req.record) return;
  for (const d of req.disks) {
    await pruneImage(deps, d.source).catch((err: unknown) => deps.log.warn('stale DR point records left', { image: d.source.image, error: (err as Error).message }));
  }
}

async function pruneImage(deps: ActivityDeps, at: MirrorRequest['disks'][number]['source']): Promise<void> {
  const io = await deps.ioctx(at.pool, at.namespace);
  const stale = await readImageIfExists(io, at.image, async (img) => {
    const [meta, snaps] = await Promise.all([img.listMetadata(), img.listSnaps()]);
    const have = new Set(snaps.filter((s) => s.namespace === 'user').map((s) => s.name));
    return Object.keys(meta).filter((k) => {
      const s = snapOfDrPointKey(k);
      return s !== null && !have.has(s);
    });
  });
  for (const k of stale ?? []) await removeImageMetaCli(deps.radosCli, at, k);
}
