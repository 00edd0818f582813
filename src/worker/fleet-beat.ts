import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/common';
import { FLEET_REGISTRY_ID, FLEET_TASK_QUEUE, hostLeave } from '../model/fleet';
import type { FleetHost, HostBeat } from '../model/fleet';
import type { LibvirtClient } from '../libvirt';
import type { Logger } from './logger';
import { Periodic } from './periodic';

/**
 * Announces this host to the fleet registry every `intervalMs`: its task queue and the VMs it
 * runs. Signal-with-start, so the first host of a fleet creates the registry and a deleted or
 * terminated registry comes back at the next beat. A beat that fails is logged; missing three
 * makes the host lost to the fleet, which is the truth when it cannot reach Temporal.
 */
export class FleetBeat {
  private readonly loop: Periodic<void>;
  private left = false;
  /**
   * The beat under way, aborted at leave(): the worker closes the connection right after. One per
   * beat: the client's calls leave their listeners on the signal they are given.
   */
  private sending?: AbortController;

  constructor(
    private readonly client: Client,
    private readonly self: { host: string; taskQueue: string; identity: string; lostAfterMs?: number },
    private readonly libvirt: () => Promise<LibvirtClient>,
    private readonly intervalMs: number,
    private readonly log: Logger,
  ) {
    this.loop = new Periodic(intervalMs, () => this.send(), (err) => this.log.warn('fleet heartbeat failed; retrying next interval', { error: String(err) }));
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
      .getHandle(FLEET_REGISTRY_ID)
      .signal('hostLeft', hostLeave(this.self.host, this.self.identity, forGood))
      .catch((err: unknown) => this.log.warn('could not leave the fleet registry', { error: String(err) }));
  }

  private async send(): Promise<void> {
    const lv = await this.libvirt();
    const domains = (await lv.listDomains()).map((d) => ({ name: d.name, uuid: d.uuid }));
    const beat: HostBeat = { ...this.self, sentAt: Date.now(), intervalMs: this.intervalMs, domains };
    if (this.left) return;
    const sending = (this.sending = new AbortController());
    try {
      await this.client.withAbortSignal(sending.signal, () =>
        this.client.workflow.signalWithStart('fleetRegistry', {
          workflowId: FLEET_REGISTRY_ID,
          taskQueue: FLEET_TASK_QUEUE,
          args: [{}],
          signal: 'hostBeat',
          signalArgs: [beat],
        }),
      );
    } catch (err) {
      if (!sending.signal.aborted) throw err;
    } finally {
      this.sending = undefined;
    }
  }
}

/** The registry's view (query), for the router's activities, `vmsnap doctor` and /metrics (fleet-metrics.ts). */
export async function readFleet(client: Client): Promise<FleetHost[]> {
  return client.workflow.getHandle(FLEET_REGISTRY_ID).query<FleetHost[]>('fleet');
}

/** Terminates a run (a lost host's child); a run already closed is fine. */
export async function terminateRun(client: Client, workflowId: string, reason: string): Promise<void> {
  try {
    await client.workflow.getHandle(workflowId).terminate(reason);
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return;
    throw err;
  }
}

