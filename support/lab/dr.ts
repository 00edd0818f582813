/**
 * The lab's DR site for the tests and benchmarks that need it: `lab/dr.sh up` (idempotent: about a
 * second when it runs, ~13 s from nothing) and its keys. Left running afterwards: it is cheap idle
 * (docs/lab.md#the-dr-site) and another test file may use it; lab:down takes it down.
 */
import path from 'node:path';
import { run } from './cli-tools';
import { defaultLabDir, loadLabDrEnv, type LabDrEnv } from './env';

export async function drSiteUp(): Promise<LabDrEnv> {
  const script = path.join(__dirname, '..', '..', 'lab', 'dr.sh');
  await run('bash', [script, 'up'], 180_000);
  return loadLabDrEnv(defaultLabDir());
}

/** `rbd` against the DR cluster as its admin. */
export function drRbd(dr: LabDrEnv, args: readonly string[], timeoutMs?: number): ReturnType<typeof run> {
  return run('rbd', ['-c', dr.conf, '--id', dr.adminId, '--keyring', dr.adminKeyring, ...args], timeoutMs);
}
