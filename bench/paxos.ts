/** paxos_propose_interval on the lab's monitor, via lab/ceph.sh (set-paxos waits until it applies). */
import path from 'node:path';
import { run } from '../support/lab/cli-tools';

const CEPH_SH = path.resolve(__dirname, '../lab/ceph.sh');

export async function setPaxos(seconds: number): Promise<void> {
  await run('bash', [CEPH_SH, 'set-paxos', String(seconds)], 60_000);
}

export async function getPaxos(): Promise<string> {
  return (await run('bash', [CEPH_SH, 'get-paxos'], 30_000)).stdout.trim();
}
