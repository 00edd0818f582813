import { randomUUID } from 'node:crypto';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { Activities } from '../../activities';
import { FailureType } from '../../src/model/failures';
import type { InspectResult } from '../../src/model/types';

/** The activities consistentSnapshot schedules (restore's are not scripted here). */
export const SNAPSHOT_STEPS = [
  'inspectDomain',
  'checkTargets',
  'prepareSnapshots',
  'endPredecessorFreeze',
  'freezeGuest',
  'snapshotDisks',
  'thawGuest',
  'cloneDisk',
  'flattenDisk',
  'finalizeDisk',
  'recordRestorePoint',
  'removeImages',
  'removeSourceSnaps',
  'applyRetention',
] as const;
export type Step = (typeof SNAPSHOT_STEPS)[number];
export type SnapshotActivities = Pick<Activities, Step>;
type Req<S extends Step> = Parameters<SnapshotActivities[S]>[0];
type Res<S extends Step> = Awaited<ReturnType<SnapshotActivities[S]>>;

/** A scripted step: `real` runs the fake host's own behaviour, so a script can fail before or after it. */
export type Script<S extends Step> = (req: Req<S>, real: () => Promise<Res<S>>, attempt: number) => Promise<Res<S>>;

export interface Call {
  step: Step;
  req: unknown;
  local: boolean;
}

/**
 * One hypervisor host and its guest as the snapshot activities see it: the guest's freeze state,
 * the source snapshots and the images that exist. A step does to this state what the real
 * activity does to the real host, so a test asserts the invariant the lab tests assert — the
 * guest ends thawed and nothing stray is left — not just which calls were made.
 */
export class FakeHost {
  readonly domain: { name: string; uuid: string };
  agent: InspectResult['agent'] = { configured: true, responding: true };
  /** The guest's disks, all RBD-backed. */
  disks = ['vda', 'vdb'];
  /** Filesystems the guest agent freezes. */
  filesystems = 2;
  /** Filesystems frozen right now, and by whom. */
  frozen = 0;
  frozenBy: 'us' | 'other' | undefined;
  readonly snaps = new Set<string>();
  readonly images = new Set<string>();
  readonly calls: Call[] = [];
  /** Worker clocks: each call starts 1 ms after the previous one returned and takes `durations` ms. */
  now = 1_750_000_000_000;
  mono = 0;
  durations: Partial<Record<Step, number>> = { freezeGuest: 5, snapshotDisks: 10, thawGuest: 3 };

  private readonly scripts: { [S in Step]?: Script<S> } = {};
  private readonly attempts = new Map<Step, number>();
  private readonly arrivals = new Map<Step, { seen: boolean; resolve: () => void; promise: Promise<void> }>();
  private release: () => void = () => undefined;
  private readonly released = new Promise<void>((resolve) => (this.release = resolve));

  constructor(domain: string) {
    // Its own UUID, so its own domain lock: scenarios never wait for each other.
    this.domain = { name: domain, uuid: randomUUID() };
  }

  /** Replaces a step's behaviour. */
  script<S extends Step>(step: S, fn: Script<S>): this {
    (this.scripts as Record<S, Script<S>>)[step] = fn;
    return this;
  }

  /** The step's first call lands but never answers: it waits until cancelled or released. Later calls answer. */
  hang(step: Step): this {
    return this.script(step, async (_req, real, attempt) => {
      const out = await real();
      if (attempt > 1) return out;
      await Promise.race([Context.current().cancelled, this.released]);
      throw new Error(`${step} released unanswered`);
    });
  }

  /** Resolves when `step` has started (for a cancel at that step). */
  reached(step: Step): Promise<void> {
    return this.arrival(step).promise;
  }

  /** Lets hung steps end (after the workflow has finished). */
  releaseHung(): void {
    this.release();
  }

  /** What a failed or cancelled run must not leave behind: our freeze, a snapshot, an image. */
  leftovers(): string[] {
    return [...(this.frozenBy === 'us' ? [`guest frozen (${this.frozen} filesystems)`] : []), ...this.snaps, ...this.images];
  }

  steps(): string[] {
    return this.calls.map((c) => c.step);
  }

  /** The calls after the first `step` (e.g. what ran as compensation). */
  after(step: Step): Step[] {
    const i = this.calls.findIndex((c) => c.step === step);
    return this.calls.slice(i + 1).map((c) => c.step);
  }

  callsOf<S extends Step>(step: S): Req<S>[] {
    return this.calls.filter((c) => c.step === step).map((c) => c.req as Req<S>);
  }

  async run<S extends Step>(step: S, req: Req<S>, local: boolean): Promise<Res<S>> {
    this.calls.push({ step, req, local });
    const attempt = (this.attempts.get(step) ?? 0) + 1;
    this.attempts.set(step, attempt);
    const a = this.arrival(step);
    a.seen = true;
    a.resolve();
    const real = () => this.real(step, req);
    const script = this.scripts[step] as Script<S> | undefined;
    return script ? script(req, real, attempt) : real();
  }

  /** Moves both clocks on, as if the host had stalled this long. */
  advance(ms: number): void {
    this.now += ms;
    this.mono += ms;
  }

  private arrival(step: Step) {
    let a = this.arrivals.get(step);
    if (!a) {
      let resolve: () => void = () => undefined;
      const promise = new Promise<void>((r) => (resolve = r));
      a = { seen: false, resolve, promise };
      this.arrivals.set(step, a);
    }
    return a;
  }

  private timed<T extends object>(step: Step, effect: () => T): T & { startedAt: number; returnedAt: number; startedMono: number; returnedMono: number } {
    this.advance(1);
    const startedAt = this.now;
    const startedMono = this.mono;
    const out = effect();
    this.advance(this.durations[step] ?? 0);
    return { ...out, startedAt, returnedAt: this.now, startedMono, returnedMono: this.mono };
  }

  private async real<S extends Step>(step: S, req: Req<S>): Promise<Res<S>> {
    const r = await this.realAny(step, req as never);
    return r as Res<S>;
  }

  private async realAny(step: Step, req: never): Promise<unknown> {
    switch (step) {
      case 'inspectDomain':
        return {
          domain: this.domain,
          host: 'host-a',
          fsid: '00000000-0000-4000-8000-0000000000f5',
          disks: this.disks.map((target) => ({ target, rbd: { pool: 'vms', image: `${this.domain.name}-${target}` } })),
          agent: this.agent,
        } satisfies Res<'inspectDomain'>;
      case 'checkTargets':
        return { complete: false, staleImages: [], staleSnaps: [] } satisfies Res<'checkTargets'>;
      case 'prepareSnapshots':
        return { removedStale: [] } satisfies Res<'prepareSnapshots'>;
      case 'endPredecessorFreeze':
        return {} satisfies Res<'endPredecessorFreeze'>;
      case 'freezeGuest':
        if (this.frozenBy === 'other') {
          throw ApplicationFailure.nonRetryable(`${this.domain.name} is already frozen by someone else`, FailureType.GuestFrozenByOther);
        }
        return this.timed(step, () => {
          this.frozen = this.filesystems;
          this.frozenBy = this.filesystems ? 'us' : undefined;
          return { frozenFilesystems: this.filesystems };
        }) satisfies Res<'freezeGuest'>;
      case 'snapshotDisks': {
        const r = req as Req<'snapshotDisks'>;
        return this.timed(step, () => {
          for (const s of r.snaps) this.snaps.add(snapName(s.source, s.snap));
          return { perDiskMs: Object.fromEntries(r.snaps.map((s) => [s.target, 10])) };
        }) satisfies Res<'snapshotDisks'>;
      }
      case 'thawGuest':
        return this.timed(step, () => {
          const thawedFilesystems = this.frozen;
          this.frozen = 0;
          this.frozenBy = undefined;
          return { thawedFilesystems };
        }) satisfies Res<'thawGuest'>;
      case 'cloneDisk': {
        const r = req as Req<'cloneDisk'>;
        this.images.add(`${r.image.pool}/${r.image.image}`);
        return { recloned: false } satisfies Res<'cloneDisk'>;
      }
      case 'flattenDisk':
        return { ms: 1, restarted: false, bytes: 64 << 20 } satisfies Res<'flattenDisk'>;
      case 'finalizeDisk': {
        const r = req as Req<'finalizeDisk'>;
        // Image mode drops the temporary source snapshot; snapshot-only mode keeps it as the result.
        if (r.image) this.snaps.delete(snapName(r.source, r.snap));
        return (r.image ? { bytes: 64 << 20 } : {}) satisfies Res<'finalizeDisk'>;
      }
      case 'recordRestorePoint':
        return undefined satisfies Res<'recordRestorePoint'>;
      case 'removeImages': {
        const r = req as Req<'removeImages'>;
        for (const i of r.images) this.images.delete(`${i.image.pool}/${i.image.image}`);
        return { removed: r.images.map((i) => i.image.image), notOwned: [] } satisfies Res<'removeImages'>;
      }
      case 'removeSourceSnaps': {
        const r = req as Req<'removeSourceSnaps'>;
        for (const s of r.snaps) this.snaps.delete(snapName(s.source, s.snap));
        return { removed: r.snaps.map((s) => s.snap) } satisfies Res<'removeSourceSnaps'>;
      }
      case 'applyRetention':
        return { kept: [], pruned: [], skipped: [] } satisfies Res<'applyRetention'>;
    }
  }
}

/**
 * The activities a worker registers, each routed to the FakeHost of the workflow that called it
 * (a child's or an escalated activity's calls included), so scenarios can run side by side.
 */
export function scriptedActivities(hostOf: (workflowId: string) => FakeHost): SnapshotActivities {
  const route = <S extends Step>(step: S) =>
    async function scripted(req: Req<S>): Promise<Res<S>> {
      const info = Context.current().info;
      return hostOf(info.workflowExecution?.workflowId ?? '').run(step, req, info.isLocal);
    };
  return Object.fromEntries(SNAPSHOT_STEPS.map((s) => [s, route(s)])) as unknown as SnapshotActivities;
}

/** An agent error as the real freeze/thaw activities raise it: retryable, typed. */
export function agentError(message: string, type: string = FailureType.FreezeFailed): ApplicationFailure {
  return ApplicationFailure.retryable(message, type);
}

function snapName(src: { pool: string; image: string }, snap: string): string {
  return `${src.pool}/${src.image}@${snap}`;
}
