import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/common';
import { FLEET_TASK_QUEUE, hostLeave } from '../model/fleet';
import type { HostBeat } from '../model/fleet';
import { HOST_ENTRY_TYPE, hostEntryId, indexOf } from '../model/fleet-index';
import type { LibvirtClient } from '../libvirt';
import type { Logger } from './logger';
import { Periodic } from './periodic';

/**
 * Announces this host to its entry in the fleet index (workflows/fleet-host.ts) every
 * `intervalMs`: its task queue, the VMs it runs and the ones defined here shut off. It looks at
 * libvirt every second and beats at once when that set changed, so a VM that migrated here is
 * in the index within about a second, not an interval. Signal-with-start, so a host's first beat
 * creates its entry and a terminated or ended one comes back at the next beat. A beat that fails
 * is logged; missing three makes the host late to the fleet, which is the truth when it cannot
 * reach Temporal.
 */
export class FleetBeat {
  private readonly loop: Periodic<void>;
  private left = false;
  /**
   * The beat under way, aborted at leave(): the worker closes the connection right after. One per
   * beat: the client's calls leave their listeners on the signal they are given.
   */
  private sending?: AbortController;
  /** The index of the last beat sent, and when: an unchanged one waits for the interval. */
  private last?: { index: string; at: number };

  constructor(
    private readonly client: Client,
    private readonly self: { host: string; taskQueue: string; identity: string; lostAfterMs?: number },
    private readonly libvirt: () => Promise<LibvirtClient>,
    private readonly intervalMs: number,
    private readonly log: Logger,
  ) {
    this.loop = new Periodic(Math.min(LOOK_MS, intervalMs), () => this.send(), (err) => this.log.warn('fleet heartbeat failed; retrying next interval', { error: String(err) }));
  }

  /** Beats at once: a host that just started is placeable without waiting one interval. */
  start(): void {
    this.loop.start({ now: true });
  }

  /**
   * Tells the registry this host stops: draining ("back soon"), or retired `forGood` (a one-shot
   * worker, a host being decommissioned). Never throws: a crash cannot call it either.
   */
  async leave(forGood = false): Promise<void> {
    // A beat still retrying when the connection closes would retry into the closed channel from
    // a timer, an uncaught exception at every clean shutdown: end it first.
    this.left = true;
    this.sending?.abort();
    await this.loop.halt();
    await this.client.workflow
      .getHandle(hostEntryId(this.self.host))
      .signal('hostLeft', hostLeave(this.self.host, this.self.identity, forGood))
      .catch((err: unknown) => this.log.warn('could not leave the fleet registry', { error: String(err) }));
  }

  private async send(): Promise<void> {
    const lv = await this.libvirt();
    const [running, all] = await Promise.all([lv.listDomains(), lv.listDomains({ which: 'defined' })]);
    const domains = running.map((d) => ({ name: d.name, uuid: d.uuid }));
    const up = new Set(domains.map((d) => d.uuid));
    const defined = all.filter((d) => !up.has(d.uuid)).map((d) => ({ name: d.name, uuid: d.uuid }));
    const index = `${indexOf({ domains, defined }).join(' ')}|${domains.map((d) => d.uuid).sort().join(' ')}`;
    const now = Date.now();
    // A skipped look must not push the beat past its interval: one look early rather than late.
    if (this.last && this.last.index === index && now - this.last.at < this.intervalMs - LOOK_MS / 2) return;
    const beat: HostBeat = { ...this.self, sentAt: now, intervalMs: this.intervalMs, domains, defined };
    if (this.left) return;
    const sending = (this.sending = new AbortController());
    try {
      await this.client.withAbortSignal(sending.signal, () =>
        this.client.workflow.signalWithStart(HOST_ENTRY_TYPE, {
          workflowId: hostEntryId(this.self.host),
          taskQueue: FLEET_TASK_QUEUE,
          args: [{}],
          signal: 'hostBeat',
          signalArgs: [beat],
        }),
      );
      this.last = { index, at: now };
    } catch (err) {
      if (!sending.signal.aborted) throw err;
    } finally {
      this.sending = undefined;
    }
  }
}

/** How often the beat looks at libvirt for a changed set of domains. */
const LOOK_MS = 1000;

/** Terminates a run (a lost host's child); a run already closed is fine. */
export async function terminateRun(client: Client, workflowId: string, reason: string): Promise<void> {
  try {
    await client.workflow.getHandle(workflowId).terminate(reason);
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return;
    throw err;
  }
}

