import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/common';
import { imageExists, listImages, openImage, removeImage } from '../ceph';
import { parseDomainXml } from '../libvirt';
import { IMAGE_SNAP, SNAP_PREFIX } from '../model/naming';
import { inScope } from '../model/identity';
import { FLEET_TASK_QUEUE } from '../model/fleet';
import { reaperAction } from '../model/owner-record';
import { META } from '../model/types';
import type { ActivityDeps } from '../../activities';
import { removeSnapIfPresent } from '../ceph/remove-snap';
import { dropOwner, listOwners, removeSourceSnaps, sourceSnapExists } from '../host/source-snaps';
import type { Logger } from './logger';
import { Periodic } from './periodic';
import { reapRestoreLeftovers } from './restore-reaper';
import type { DefinedElsewhere, RestoreReapReport } from './restore-reaper';
import type { RunStatus } from '../model/restore-leftovers';

/**
 * Removes what runs that ended without compensating left behind: a terminated workflow, or one
 * that hit its run timeout, gets no compensation from Temporal (temporalio/temporal#1412), and its
 * local activities may even have finished a snapshot after the termination. Only things vmsnap
 * recorded as a workflow's own are considered, and only once that workflow is no longer running:
 *  - unfinished images (`vmsnap.state` != complete) in the image pool;
 *  - `vmsnap-*` snapshots on this host's domains' RBD disks with a `vmsnap.snap-owner.*` record and
 *    no `vmsnap.done.*` mark (kept snapshot-only results carry that mark);
 *  - disks of restores that ended without completing, and disks replaced by completed in-place
 *    restores once they are `keepReplacedMs` old — never one a domain defined on any host of the fleet uses
 *    (src/worker/restore-reaper.ts).
 */
export interface ReapReport {
  images: string[];
  snaps: string[];
  restore: RestoreReapReport;
}

export class OrphanReaper {
  private readonly loop: Periodic<ReapReport>;

  constructor(
    private readonly deps: ActivityDeps,
    private readonly client: Client,
    private readonly imagePool: string,
    private readonly log: Logger,
    intervalMs: number,
    /** How long an absent snapshot's owner record is kept for a late arrival (see mayDropAbsent). */
    private readonly horizonMs: number,
    /** How long a disk a completed in-place restore replaced is kept (src/worker/restore-reaper.ts). */
    private readonly keepReplacedMs: number = 24 * 3600_000,
  ) {
    this.loop = new Periodic(intervalMs, () => this.sweepOnce(), (err) => this.log.warn('orphan sweep failed', { error: String(err) }));
  }

  start(): void {
    this.loop.start();
  }

  stop(): void {
    this.loop.stop();
  }

  /** Stops and waits for a pass under way: the worker closes its connections after this. */
  halt(): Promise<void> {
    return this.loop.halt();
  }

  /** One sweep now (nothing while one is under way). Throws what the sweep threw: a caller must not read a failed sweep as a clean one. */
  async sweep(): Promise<ReapReport> {
    return (await this.loop.run()) ?? { images: [], snaps: [], restore: { removed: [], kept: [] } };
  }

  private async sweepOnce(): Promise<ReapReport> {
    const statuses = new Map<string, Promise<RunStatus>>();
    const statusOf = (workflowId: string): Promise<RunStatus> => {
      if (!statuses.has(workflowId)) {
        statuses.set(
          workflowId,
          this.client.workflow
            .getHandle(workflowId)
            .describe()
            .then((d) => d.status.name as RunStatus, (err: unknown) => (err instanceof WorkflowNotFoundError ? 'NOT_FOUND' : 'UNKNOWN')),
        );
      }
      return statuses.get(workflowId)!;
    };
    // UNKNOWN (Temporal unreachable): treat as running — never delete on a guess.
    const isRunning = async (workflowId: string) => ['RUNNING', 'UNKNOWN'].includes(await statusOf(workflowId));
    const images = await this.reapImages(isRunning);
    const snaps = await this.reapSnaps(isRunning);
    const restore = await reapRestoreLeftovers(await this.deps.libvirt(), {
      scope: this.deps.scope,
      host: this.deps.host,
      cli: this.deps.radosCli,
      keepReplacedMs: this.keepReplacedMs,
      ioctx: (pool, ns) => this.deps.ioctx(pool, ns),
      statusOf,
      definedElsewhere: (disks) =>
        this.client.workflow.execute('fleetDisksInUse', {
          taskQueue: FLEET_TASK_QUEUE,
          workflowId: `vmsnap-disks-in-use-${this.deps.host}-${randomUUID().slice(0, 8)}`,
          args: [{ disks, askingHost: this.deps.host }],
          workflowExecutionTimeout: '1m',
        }) as Promise<DefinedElsewhere>,
    });
    if (images.length || snaps.length) this.log.warn('removed leftovers of runs that ended uncompensated', { images, snaps });
    if (restore.removed.length) this.log.warn('removed disks of ended restores', { disks: restore.removed });
    if (restore.kept.length) this.log.warn('could not remove disks of ended restores', { kept: restore.kept });
    return { images, snaps, restore };
  }

  private async reapImages(isRunning: (id: string) => Promise<boolean>): Promise<string[]> {
    const io = await this.deps.ioctx(this.imagePool);
    const removed: string[] = [];
    for (const name of await listImages(io)) {
      const img = await openImage(io, name).catch(() => undefined);
      if (!img) continue;
      let workflowId: string | null;
      try {
        const meta = await img.listMetadata();
        if (meta[META.owner] !== 'vmsnap' || meta[META.state] === 'complete') continue;
        // Another namespace's or fleet's run is not ours to judge: its workflow id means nothing here.
        if (!inScope(meta, this.deps.scope)) continue;
        if (meta[META.image] !== undefined && meta[META.image] !== `${this.imagePool}/${name}`) continue;
        workflowId = meta[META.workflowId] ?? null;
        if (!workflowId || (await isRunning(workflowId))) continue;
        await removeSnapIfPresent(img, IMAGE_SNAP);
      } finally {
        await img.close();
      }
      if (workflowId && (await imageExists(io, name))) {
        await removeImage(io, name);
        removed.push(`${this.imagePool}/${name} (workflow ${workflowId})`);
      }
    }
    return removed;
  }

  /**
   * The owner records (omap of the pool's vmsnap object) of snapshots on this host's domains'
   * disks. Each call on a source image runs in that VM's snapshotter lane, bounded; nothing here
   * touches a live image from the worker's own session.
   */
  private async reapSnaps(isRunning: (id: string) => Promise<boolean>): Promise<string[]> {
    const lv = await this.deps.libvirt();
    const disks = new Map<string, Set<string>>(); // pool/namespace → images of this host's domains
    for (const dom of await lv.listDomains()) {
      for (const disk of parseDomainXml(await lv.getDomainXml(dom)).disks) {
        if (!disk.rbd || disk.rbd.snapshot) continue;
        const key = `${disk.rbd.pool}/${disk.rbd.namespace ?? ''}`;
        disks.set(key, (disks.get(key) ?? new Set()).add(disk.rbd.image));
      }
    }
    const removed: string[] = [];
    for (const [key, images] of disks) {
      const [pool, ns] = key.split('/');
      const loc = { pool, ...(ns ? { namespace: ns } : {}) };
      for (const { image, snap, record } of await listOwners(this.deps, loc)) {
        if (!record || !images.has(image) || !snap.startsWith(SNAP_PREFIX)) continue;
        const base = { scope: this.deps.scope, now: Date.now(), horizonMs: this.horizonMs, snapExists: false };
        // Cheap checks first: out of scope, kept, or still running needs no call on the image.
        if (reaperAction(record, { ...base, runOpen: false, snapExists: true }) === 'leave') continue;
        if (await isRunning(record.workflowId)) continue;
        const source = { ...loc, image };
        const action = reaperAction(record, { ...base, runOpen: false, snapExists: await sourceSnapExists(this.deps, source, snap) });
        if (action === 'remove-snapshot') {
          await removeSourceSnaps(this.deps, [{ source, snap }], { lateMayLand: false });
          removed.push(`${pool}/${image}@${snap} (workflow ${record.workflowId})`);
        } else if (action === 'drop-record') {
          await dropOwner(this.deps, source, snap);
        }
      }
    }
    return removed;
  }
}
