import { describe, expect, it } from 'vitest';
import { thawGuest } from '../../activities/thaw';
import type { ActivityDeps } from '../../activities/deps';

const UUID = '6f1b1c2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f';

describe('the hand-off thaw on the host a guest migrated to', () => {
  it('leaves a freeze this host journaled itself alone: that window is its own run’s to end', async () => {
    const warned: string[] = [];
    const deps = {
      libvirt: async () => {
        throw new Error('libvirt must not be called');
      },
      guard: { read: async () => ({ domainUuid: UUID, owner: 'local-run/1', mode: 'window' }) },
      log: { warn: (m: string) => warned.push(m), info: () => undefined, error: () => undefined },
    } as unknown as ActivityDeps;
    const r = await thawGuest(deps)({ domainUuid: UUID, domainName: 'vm', agentTimeoutSec: 1, thawedBy: 'handoff', owner: 'moved-run/1' });
    expect(r).toMatchObject({ thawedFilesystems: 0, skippedForLocalFreeze: true });
    expect(warned.join()).toMatch(/own freeze/);
  });
});
