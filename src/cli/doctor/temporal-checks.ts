import { Client } from '@temporalio/client';
import type { Connection } from '@temporalio/client';
import { FLEET_TASK_QUEUE, hostState, secondsSinceSeen } from '../../model/fleet';
import { listHosts } from '../../worker/fleet-index';
import type { FleetHost } from '../../model/fleet';
import { temporal } from '@temporalio/proto';
import { prepareSearchAttributes, temporalCliFor } from '../../temporal-setup';
import type { Config } from '../../config';
import { hostTaskQueue } from '../../config';
import { bulkTaskQueue } from '../../model/naming';
import { SEARCH_ATTRIBUTE_TYPES } from '../../model/search-attributes';
import { closeConnection, openConnection } from '../temporal-client';
import { fail, messageOf, ok, warn, within } from './check';
import type { CheckResult } from './check';

/**
 * Temporal reachable, the namespace exists, vmsnap's search attributes are registered with the
 * right types (`fix` registers missing ones: operator AddSearchAttributes), and a worker polls
 * this host's task queue.
 */
export async function checkTemporal(config: Config, opts: { fix: boolean }): Promise<CheckResult[]> {
  const { address, namespace } = config.temporal;
  let conn: Connection;
  try {
    conn = await within(10_000, 'connect', openConnection(config));
  } catch (err) {
    return [fail('temporal', `cannot reach ${address}: ${messageOf(err)}`, 'start the Temporal server or set --temporal-address / VMSNAP_TEMPORAL_ADDRESS / TEMPORAL_ADDRESS', true)];
  }
  try {
    const out: CheckResult[] = [];
    const info = await conn.workflowService.getSystemInfo({}).catch(() => undefined);
    out.push(ok('temporal', `reachable at ${address}${info?.serverVersion ? ` (server ${info.serverVersion})` : ''}`));
    try {
      await within(10_000, 'describe namespace', conn.workflowService.describeNamespace({ namespace }));
      out.push(ok('temporal.namespace', namespace));
    } catch (err) {
      out.push(fail('temporal.namespace', `${namespace}: ${messageOf(err)}`, `temporal operator namespace create --namespace ${namespace}, or set --namespace`));
      return out;
    }
    out.push(await checkSearchAttributes(conn, namespace, opts.fix));
    out.push(await checkWorker(conn, namespace, hostTaskQueue(config.host), 'WORKFLOW'));
    out.push(await checkWorker(conn, namespace, bulkTaskQueue(hostTaskQueue(config.host)), 'ACTIVITY'));
    out.push(await checkWorker(conn, namespace, FLEET_TASK_QUEUE, 'WORKFLOW'));
    out.push(...(await checkFleet(conn, namespace)));
    return out;
  } finally {
    // Drains first: a check that gave up (within) may have left its call in flight.
    await closeConnection(conn);
  }
}

/** The fleet as its registry knows it: every host, alive or lost, its VMs and when it was last heard. */
async function checkFleet(conn: Connection, namespace: string): Promise<CheckResult[]> {
  let hosts: FleetHost[];
  try {
    const client = new Client({ connection: conn, namespace });
    hosts = await within(10_000, 'read the fleet index', listHosts(client));
  } catch (err) {
    return [warn('fleet', `no fleet index answer: ${messageOf(err)}`, 'start a vmsnap worker: each one announces its host to its entry workflow vmsnap-host-<host>')];
  }
  const now = Date.now();
  if (!hosts.length) return [warn('fleet', 'the fleet index knows no host', 'start a vmsnap worker on each hypervisor host')];
  return hosts.map((h) => {
    const seen = `last seen ${secondsSinceSeen(h, now)} s ago`;
    const vms = h.domains.map((d) => d.name).sort().join(', ') || 'no running VM';
    const state = hostState(h, now);
    if (state === 'alive') return ok(`fleet.${h.host}`, `${h.taskQueue}, ${seen}, runs: ${vms}`);
    const retired = `if ${h.host} is gone for good: vmsnap fleet forget ${h.host}`;
    return state === 'lost'
      ? warn(`fleet.${h.host}`, `LOST: ${seen} (beats every ${h.intervalMs / 1000} s); last known VMs: ${vms}`, `check the vmsnap worker and libvirtd on ${h.host}; runs there fail HostLost until it is back; ${retired}`)
      : warn(
          `fleet.${h.host}`,
          `${state === 'draining' ? 'DRAINING (its worker stopped cleanly)' : 'LATE (beats missing)'}: ${seen}; last known VMs: ${vms}`,
          `start the vmsnap worker on ${h.host}; until then a VM running nowhere else is "not placed" (unsure), not "not found"; ${retired}`,
        );
  });
}

async function checkSearchAttributes(conn: Connection, namespace: string, fix: boolean): Promise<CheckResult> {
  const name = 'temporal.search-attributes';
  try {
    const s = await within(30_000, 'search attributes', prepareSearchAttributes(conn, namespace, fix));
    if (s.wrongType.length) {
      return fail(name, `registered with the wrong type: ${s.wrongType.join(', ')}`, `remove and re-add them as ${s.wrongType.map((k) => `${k}=${SEARCH_ATTRIBUTE_TYPES[k]}`).join(', ')}`);
    }
    if (s.missing.length) {
      return fail(name, `missing: ${s.missing.join(', ')}`, `vmsnap setup (or vmsnap doctor --fix), or ${temporalCliFor(s.missing, namespace)}`);
    }
    if (s.added.length) return ok(name, `registered ${s.added.join(', ')} (--fix)`);
    return ok(name, s.present.join(', '));
  } catch (err) {
    return fail(name, messageOf(err), 'check the namespace and that this client may call the operator service');
  }
}

async function checkWorker(conn: Connection, namespace: string, taskQueue: string, type: 'WORKFLOW' | 'ACTIVITY'): Promise<CheckResult> {
  const name = type === 'WORKFLOW' ? 'temporal.worker' : 'temporal.worker.bulk';
  try {
    const r = await within(
      10_000,
      'describe task queue',
      conn.workflowService.describeTaskQueue({
        namespace,
        taskQueue: { name: taskQueue, kind: temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
        taskQueueType: temporal.api.enums.v1.TaskQueueType[`TASK_QUEUE_TYPE_${type}`],
      }),
    );
    const pollers = r.pollers ?? [];
    if (!pollers.length) return warn(name, `no worker polls ${taskQueue}`, `run \`vmsnap worker\` on this host (or pass --host to check another)`);
    return ok(name, `${pollers.length} worker(s) on ${taskQueue}: ${pollers.map((p) => p.identity).join(', ')}`);
  } catch (err) {
    return warn(name, `cannot describe ${taskQueue}: ${messageOf(err)}`, 'check the namespace permissions');
  }
}
