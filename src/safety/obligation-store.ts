import { listOmapValues, removeOmapKey, setOmapValue } from '../ceph/omap-cli';
import type { OmapCliOptions, OmapTarget } from '../ceph/omap-cli';
import { OBLIGATIONS_OBJECT, decodeObligation, encodeObligation } from '../model/freeze-obligation';
import type { FreezeObligation } from '../model/freeze-obligation';

/**
 * The cluster-wide freeze obligations (src/model/freeze-obligation.ts): one omap key per frozen
 * domain on one object of the image pool, which every hypervisor's cephx key already reaches.
 * Each call is a bounded `rados` process (src/ceph/omap-cli.ts): a hung monitor fails the call,
 * it never holds a thaw path.
 */
export class ObligationStore {
  private readonly target: OmapTarget;
  constructor(private readonly cli: OmapCliOptions, pool: string) {
    this.target = { pool, object: OBLIGATIONS_OBJECT };
  }

  async write(o: FreezeObligation): Promise<void> {
    await setOmapValue(this.cli, this.target, o.domainUuid, encodeObligation(o));
  }

  /** Every open record; malformed ones are skipped (and never honoured). */
  async all(): Promise<FreezeObligation[]> {
    const out: FreezeObligation[] = [];
    for (const [, v] of await listOmapValues(this.cli, this.target)) {
      const o = decodeObligation(v);
      if (o) out.push(o);
    }
    return out;
  }

  async read(domainUuid: string): Promise<FreezeObligation | undefined> {
    return (await this.all()).find((o) => o.domainUuid === domainUuid.toLowerCase());
  }

  /**
   * Removes the record of this freeze only: a newer freeze of the domain (its key rewritten since)
   * is somebody's open window. Without `freezeId` (an operator's `vmsnap thaw`), whatever is there.
   * True when no record of that freeze is left.
   */
  async resolve(domainUuid: string, freezeId?: string): Promise<boolean> {
    const open = await this.read(domainUuid);
    if (!open) return true;
    if (freezeId && open.freezeId !== freezeId) return true;
    await removeOmapKey(this.cli, this.target, open.domainUuid);
    return true;
  }
}
