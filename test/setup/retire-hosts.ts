import { afterAll } from 'vitest';
import { Client, Connection } from '@temporalio/client';
import { hostLeave, workerIdentity } from '../../src/model/fleet';
import { hostEntryId } from '../../src/model/fleet-index';
import { labVars, need } from '../../support/lab/env';
import { WorkerProcess } from '../helpers/worker-process';

/*
 * A lab test's worker hosts are gone for good when its file ends, as a decommissioned host's are.
 * Left draining (a clean stop) or late (a SIGKILL), each would leave every later file's "VM running
 * nowhere" unsure, DomainNotPlaced instead of DomainNotFound, for its whole loss threshold. Said in
 * the dead worker's own words (hostLeft forGood with its identity), so a host another worker
 * serves by now is left alone. Registered first, so it runs after the file's own afterAll.
 */
afterAll(async () => {
  const workers = [...WorkerProcess.started];
  WorkerProcess.started.clear();
  if (!workers.length) return;
  await Promise.all(workers.map((w) => w.stop()));
  const vars = labVars();
  const connection = await Connection.connect({ address: need(vars, 'TEMPORAL_ADDRESS'), connectTimeout: 5000 }).catch(() => undefined);
  if (!connection) return; // a file that ends with Temporal down (a fault test) has nothing to say
  try {
    const client = new Client({ connection, namespace: vars.TEMPORAL_NAMESPACE ?? 'default' });
    for (const w of workers) {
      if (w.lastPid === undefined) continue;
      await client.workflow.getHandle(hostEntryId(w.host)).signal('hostLeft', hostLeave(w.host, workerIdentity(w.host, w.lastPid), true)).catch(() => undefined);
    }
  } finally {
    await connection.close();
  }
}, 120_000);
