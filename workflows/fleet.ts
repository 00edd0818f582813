import { patched } from '@temporalio/workflow';
import type { SnapshotRequest } from '../src/model/input';
import type { RestoreRequest } from '../src/model/restore-input';
import type { RestoreResult } from '../src/model/restore-point';
import type { SnapshotResult } from '../src/model/types';
import { routeSnapshot } from './fleet-route';
import { parseSnapshotInput } from '../src/model/input';
import { parseRestoreInput } from '../src/model/restore-input';
import { checkedInput } from './checked-input';
import { restoreHere } from './restore-vm';
import { routeRestore } from './restore-route';

/*
 * The fleet queue's workflows (`vmsnap`, FLEET_TASK_QUEUE): what every host's fleet worker runs,
 * bundled apart from a host queue's (workflows/index.ts). The types are the same, so callers start
 * `consistentSnapshot` or `restoreVm` by VM name on the fleet queue as on a host's; here each is
 * its router, which finds the VM and runs the whole run as a child on the VM's host. A module of
 * its own, not a branch on the task queue: an offline replay runs under another queue name, so
 * only a bundle whose types are the routers replays a router's history as it ran.
 */
export * from './index';

/** A snapshot run by VM name: located, then run as a child on its host (workflows/fleet-route.ts). */
export async function consistentSnapshot(request: SnapshotRequest): Promise<SnapshotResult> {
  return routeSnapshot(checkedInput(parseSnapshotInput(request)), request);
}

/** A restore by VM name: its image set chosen and its VM found, then run on that host (workflows/restore-route.ts). */
export async function restoreVm(request: RestoreRequest): Promise<RestoreResult> {
  const input = checkedInput(parseRestoreInput(request));
  if (patched(ROUTED)) return routeRestore(input);
  // Histories from before the router: the restore ran on the fleet queue's worker itself.
  return restoreHere(input);
}

/** Histories from before restoreVm on the fleet queue routed itself. Retire 2027-06-01, with the fleet-wide restore's first release one minor old. */
const ROUTED = 'vmsnap-restore-routed';
