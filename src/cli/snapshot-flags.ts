import type { ParseArgsConfig } from 'node:util';
import type { SnapshotRequest } from '../model/input';
import { CliError, Exit } from './exit-codes';

/** Flags that become workflow input: shared by `vmsnap snapshot` and `vmsnap schedule create`. */
export const SNAPSHOT_INPUT_OPTIONS = {
  disk: { type: 'string', multiple: true },
  'skip-non-rbd': { type: 'boolean' },
  quiesce: { type: 'string' },
  pool: { type: 'string' },
  image: { type: 'string', multiple: true },
  'no-clone': { type: 'boolean' },
  'freeze-deadline-ms': { type: 'string' },
  'agent-timeout-s': { type: 'string' },
  'snapshot-timeout-ms': { type: 'string' },
  label: { type: 'string', multiple: true },
} as const satisfies ParseArgsConfig['options'];

export const SNAPSHOT_INPUT_HELP = `  --disk TARGET            snapshot only this disk (repeatable); default: all RBD disks
  --skip-non-rbd           with the default disk set, skip non-RBD disks instead of failing
  --quiesce require|prefer|skip   default prefer (freeze if the agent answers, else say quiesced:false)
  --pool POOL              image pool for the flattened copies (default images)
  --image TARGET=NAME      image name for a disk (repeatable)
  --no-clone               keep only the RBD snapshot on the source image
  --freeze-deadline-ms N   max time the guest may stay frozen (default 10000)
  --agent-timeout-s N      guest agent timeout (default 5)
  --snapshot-timeout-ms N  bound on the snapshot step (default 8000)
  --label KEY=VALUE        recorded on created images (repeatable)`;

/** Flag values → raw workflow input; parseSnapshotInput validates it. */
export function buildRequest(domain: string, v: Record<string, unknown>, defaultPool: string): SnapshotRequest {
  const num = (k: string) => (v[k] === undefined ? undefined : Number(v[k]));
  const req: Record<string, unknown> = {
    domain,
    disks: v.disk,
    skipNonRbdDisks: v['skip-non-rbd'],
    quiesce: v.quiesce,
    target: {
      pool: (v.pool as string | undefined) ?? defaultPool,
      clone: v['no-clone'] ? false : undefined,
      images: v.image ? pairs(v, 'image') : undefined,
    },
    freezeDeadlineMs: num('freeze-deadline-ms'),
    agentTimeoutSec: num('agent-timeout-s'),
    snapshotTimeoutMs: num('snapshot-timeout-ms'),
    labels: v.label ? pairs(v, 'label') : undefined,
  };
  return JSON.parse(JSON.stringify(req)) as SnapshotRequest; // drops undefined: the recorded input stays minimal
}

function pairs(v: Record<string, unknown>, k: string): Record<string, string> {
  return Object.fromEntries(
    ((v[k] as string[] | undefined) ?? []).map((p) => {
      const i = p.indexOf('=');
      if (i <= 0) throw new CliError(`--${k} expects KEY=VALUE, got "${p}"`, Exit.badInput);
      return [p.slice(0, i), p.slice(i + 1)];
    }),
  );
}
