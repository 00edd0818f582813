import type { SnapshotRequest } from '../model/input';
import { CliError, Exit } from './exit-codes';
import type { Values } from './options';
import type { SNAPSHOT_INPUT } from './specs/snapshot-input';

type SnapshotFlags = Values<typeof SNAPSHOT_INPUT>;
type SnapshotDurations = { 'freeze-deadline'?: number; 'agent-timeout'?: number; 'snapshot-timeout'?: number; 'mirror-wait'?: number };

/** Flag values → raw workflow input; parseSnapshotInput validates it. */
export function buildRequest(domain: string, v: SnapshotFlags, ms: SnapshotDurations, defaultPool: string): SnapshotRequest {
  if (ms['mirror-wait'] !== undefined && !v.mirror) throw new CliError('--mirror-wait applies with --mirror only', Exit.badInput);
  const req: Record<string, unknown> = {
    domain,
    disks: v.disk,
    skipNonRbdDisks: v['skip-non-rbd'],
    quiesce: v.quiesce,
    target: {
      pool: v.pool ?? defaultPool,
      clone: v['no-clone'] ? false : undefined,
      images: v.image ? pairs(v.image, 'image') : undefined,
      mirror: v.mirror ? { waitMs: ms['mirror-wait'] } : undefined,
    },
    freezeDeadlineMs: ms['freeze-deadline'],
    agentTimeoutSec: ms['agent-timeout'] === undefined ? undefined : ms['agent-timeout'] / 1000,
    snapshotTimeoutMs: ms['snapshot-timeout'],
    labels: v.label ? pairs(v.label, 'label') : undefined,
  };
  return JSON.parse(JSON.stringify(req)) as SnapshotRequest; // drops undefined: the recorded input stays minimal
}

function pairs(list: readonly string[], flag: string): Record<string, string> {
  return Object.fromEntries(
    list.map((p) => {
      const i = p.indexOf('=');
      if (i <= 0) throw new CliError(`--${flag} expects KEY=VALUE, got "${p}"`, Exit.badInput);
      return [p.slice(0, i), p.slice(i + 1)];
    }),
  );
}
