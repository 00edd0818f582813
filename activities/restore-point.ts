import { openImage } from '../src/ceph';
import { restoreKeyFix } from '../src/host/restore-key';
import { encodeRestorePoint, RESTORE_POINT_KEY, RESTORE_POINT_VERSION } from '../src/model/restore-point';
import type { RestorePoint } from '../src/model/restore-point';
import { restorePointMac } from '../src/restore/record-mac';
import type { RbdLocation } from '../src/model/types';
import type { ActivityDeps } from './deps';
import { during } from './step-error';

export interface RecordRestorePointRequest {
  workflowId: string;
  runId: string;
  domain: { name: string; uuid: string };
  quiesced: boolean;
  disks: { target: string; source: RbdLocation; image: RbdLocation }[];
}

/**
 * Writes the restore record (src/model/restore-point.ts) on every image of a finished run. The
 * domain XML is read here, over the read-only connection, and goes straight to Ceph: it never
 * passes through workflow history. The record is signed with the fleet's restore key
 * (src/restore/record-mac.ts); without a key it is written unsigned, with a warning: `restore
 * --as` will refuse it. Idempotent: a retry rewrites the same key.
 */
export function recordRestorePoint(deps: ActivityDeps) {
  return async function recordRestorePoint(req: RecordRestorePointRequest): Promise<void> {
    const lv = await deps.libvirtReadOnly();
    const dom = await during(`look up domain ${req.domain.uuid}`, () => lv.lookupDomainByUuid(req.domain.uuid));
    const domainXml = await during('read domain XML', () => lv.getDomainXml(dom, { inactive: true }));
    const record: Omit<RestorePoint, 'v' | 'mac'> = {
      workflowId: req.workflowId,
      runId: req.runId,
      domain: req.domain,
      quiesced: req.quiesced,
      recordedAt: new Date().toISOString(),
      disks: req.disks.map((d) => ({ target: d.target, image: `${d.image.pool}/${d.image.image}`, source: `${d.source.pool}/${d.source.image}` })),
      domainXml,
    };
    const key = deps.restoreKey ? await deps.restoreKey() : undefined;
    if (!key?.ok) {
      deps.log.warn('restore record written without a MAC: restore --as will refuse it', {
        workflowId: req.workflowId,
        why: key?.why ?? 'no restore key configured',
        fix: restoreKeyFix(key?.file ?? '/etc/vmsnap/restore.key'),
      });
    }
    const value = encodeRestorePoint(key?.ok ? { ...record, mac: restorePointMac({ v: RESTORE_POINT_VERSION, ...record }, key.key) } : record);
    for (const d of req.disks) {
      const io = await deps.ioctx(d.image.pool, d.image.namespace);
      const img = await during(`open image ${d.image.image}`, () => openImage(io, d.image.image));
      try {
        await during('write restore record', () => img.setMetadata(RESTORE_POINT_KEY, value));
      } finally {
        await img.close();
      }
    }
  };
}
