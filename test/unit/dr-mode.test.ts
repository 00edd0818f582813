import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { checkMirroring } from '../../activities/mirror';
import type { ActivityDeps } from '../../activities/deps';
import { parseSnapshotInput } from '../../src/model/input';
import { parseCommand } from '../../src/cli/options';
import { buildRequest } from '../../src/cli/snapshot-flags';
import { SNAPSHOT } from '../../src/cli/specs/snapshot';

/** `vmsnap snapshot DOMAIN ...flags` → the run's input, as the command builds it (no Temporal). */
function request(...flags: string[]) {
  const parsed = parseCommand(SNAPSHOT, ['vm-42', ...flags])!;
  return buildRequest('vm-42', parsed.values, parsed.ms, 'images');
}

describe('vmsnap snapshot --mirror (DR mode, docs/dr.md)', () => {
  it('--mirror asks for DR mode with the default wait; --mirror-wait sets it', () => {
    expect(request().target).toEqual({ pool: 'images' });
    expect(request('--mirror').target).toEqual({ pool: 'images', mirror: {} });
    const input = parseSnapshotInput(request('--mirror', '--no-clone'));
    expect(input.ok && input.input.target).toEqual({ pool: 'images', clone: false, mirror: { waitMs: 600_000 } });
    expect(request('--mirror', '--mirror-wait', '90s').target).toEqual({ pool: 'images', mirror: { waitMs: 90_000 } });
  });

  it('--mirror-wait without --mirror, or not a duration, is bad input before anything is contacted', () => {
    expect(() => request('--mirror-wait', '90s')).toThrow(/--mirror-wait applies with --mirror only/);
    expect(() => request('--mirror', '--mirror-wait', 'soon')).toThrow(/--mirror-wait/);
  });
});

describe('DR mode on a host without a DR site', () => {
  it('refuses before looking at any disk: MirrorUnavailable, not retryable, naming the setting', async () => {
    const err = await checkMirroring({} as ActivityDeps, [{ target: 'vdb', rbd: { pool: 'vms', image: 'vm-42-vdb' } }]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err).toMatchObject({ type: 'MirrorUnavailable', nonRetryable: true });
    expect((err as Error).message).toContain('drCeph');
  });
});
