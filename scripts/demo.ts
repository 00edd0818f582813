/**
 * `npm run demo`: brings the lab up, starts a host worker, snapshots the demo guest end to end
 * through the real Temporal server, prints the result and where to see it in the Web UI.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { loadConfig } from '../src/config';
import { createHostWorker } from '../src/worker/run-worker';
import { jsonLogger } from '../src/worker/logger';
import { Client, Connection } from '@temporalio/client';
import { SA } from '../src/model/search-attributes';
import type { SnapshotResult } from '../src/model/types';
import { humanResult } from '../src/cli/commands/snapshot';
import { labVars, need } from '../support/lab/env';

async function main(): Promise<number> {
  const root = path.resolve(__dirname, '..');
  if (!process.argv.includes('--no-lab-up')) {
    const up = spawnSync('bash', [path.join(root, 'lab/lab.sh'), 'up'], { stdio: 'inherit' });
    if (up.status !== 0) {
      console.error('demo: the lab did not come up (see above)');
      return 1;
    }
  }
  const vars = labVars();
  const domain = need(vars, 'VMSNAP_GUEST_3DISK');
  const config = loadConfig(
    {
      temporal: { address: need(vars, 'TEMPORAL_ADDRESS') },
      libvirt: { uri: need(vars, 'LIBVIRT_DEFAULT_URI'), statusDir: vars.VMSNAP_LIBVIRT_STATUS_DIR },
      ceph: { conf: need(vars, 'CEPH_CONF'), id: vars.CEPH_VMSNAP_ID ?? 'admin', keyring: vars.CEPH_VMSNAP_KEYRING ?? vars.CEPH_KEYRING },
      host: 'lab',
      stateDir: path.join(need(vars, 'VMSNAP_LAB_DIR'), 'vmsnap-state'),
      metricsPort: 0,
    },
    {},
    undefined,
  );
  const worker = await createHostWorker(config, jsonLogger({ host: 'lab' }));
  const running = worker.run();
  const client = new Client({ connection: await Connection.connect({ address: config.temporal.address }) });
  const workflowId = `demo-${domain}-${Date.now()}`;
  try {
    console.log(`\nsnapshotting ${domain} (workflow ${workflowId}) ...`);
    const result = (await client.workflow.execute('consistentSnapshot', {
      taskQueue: worker.taskQueue,
      workflowId,
      args: [{ domain, quiesce: 'require', verify: true }],
      staticSummary: `snapshot ${domain}: all RBD disks → ${config.imagePool}`,
      memo: { input: { domain, quiesce: 'require', verify: true } },
      typedSearchAttributes: [
        { key: SA.domain, value: domain },
        { key: SA.host, value: 'lab' },
      ],
    })) as SnapshotResult;
    console.log('\n' + humanResult(result));
    console.log(`\nresult: ${JSON.stringify(result, null, 2)}`);
    const ui = vars.TEMPORAL_UI_URL ?? 'http://127.0.0.1:8233';
    console.log(`\nTemporal Web UI: ${ui}/namespaces/default/workflows/${workflowId}`);
    if (!result.quiesced || result.frozenFilesystems < 1) {
      console.error('demo: expected a quiesced snapshot');
      return 1;
    }
    return 0;
  } finally {
    worker.shutdown({ retire: true });
    await running;
    await client.connection.close();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error('demo failed:', err);
    process.exit(1);
  },
);
