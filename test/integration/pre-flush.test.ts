import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SnapshotRequest } from '../../src/model/input';
import type { SnapshotResult } from '../../src/model/types';
import { LibvirtClient } from '../../src/libvirt';
import { PRE_FLUSH_CALL_TIMEOUT_MS } from '../../src/model/pre-flush';
import { dirtyGuest, removeDirtyFiles } from '../../support/lab/dirty-writer';
import { busyboxSh, runInGuest } from '../../support/lab/guest-run';
import { loadLabEnv } from '../../support/lab/env';
import { ticksPath } from '../../support/lab/probe';
import { startHarness, uniqueId } from '../helpers/harness';
import type { Harness } from '../helpers/harness';
import { ensureThawed, freezeStatus } from '../helpers/guest';
import { quiescedTruthViolations } from '../helpers/truth';
import { CephView } from '../helpers/ceph-inspect';
import { startScratchGuest } from '../../support/lab/scratch-guest';
import type { ScratchGuest } from '../../support/lab/scratch-guest';
import { until } from '../helpers/until';
import { extendedIt } from '../helpers/lanes';

// The pre-flush (src/model/pre-flush.ts) on the real guests: it runs in the guest before the
// freeze, and whatever it does — finishes, fails because the command is missing or the agent
// blocks guest-exec, or hangs — the run freezes within the pre-flush's bound and is quiesced
// exactly when its freeze held (the truth oracle checks every snapshot).
const env = loadLabEnv();
if (!env.guests || !env.libvirt) throw new Error(`the lab env in ${env.dir} has no guests: run npm run lab:up`);
const g1 = env.guests.oneDisk;

const harnesses: Harness[] = [];
/** The worker with the product's default pre-flush, shared by the cases that need no other. */
let defaults: Harness | undefined;
let lv: LibvirtClient;
let ceph: CephView;

beforeAll(async () => {
  lv = await LibvirtClient.connect({ uri: env.libvirt!.uri });
});

afterAll(async () => {
  await ensureThawed(harnesses[0]?.vars ?? {}, g1).catch(() => undefined);
  const dom = await lv.lookupDomainByName(g1).catch(() => undefined);
  if (dom) await removeDirtyFiles(lv, dom).catch(() => undefined);
  for (const h of harnesses) await h.stop().catch(() => undefined);
  await lv?.close();
});

async function worker(preFlush: { preFlushTimeoutMs?: number; preFlushCommand?: string[] }): Promise<Harness> {
  const h = await startHarness({ config: preFlush });
  harnesses.push(h);
  ceph ??= new CephView(h.vars);
  return h;
}

/** A snapshot-only run of `domain`, retried while another engineer's run holds the VM (DomainBusy). */
async function snapshot(h: Harness, domain: string): Promise<SnapshotResult> {
  const request: SnapshotRequest = { domain, quiesce: 'require', target: { clone: false } };
  for (let attempt = 1; ; attempt++) {
    try {
      return await h.client.workflow.execute('consistentSnapshot', { taskQueue: h.hw.taskQueue, workflowId: uniqueId('preflush'), args: [request] });
    } catch (err) {
      if (attempt >= 10 || !/DomainBusy/.test(causes(err))) throw err;
      await new Promise((r) => setTimeout(r, 5000));
    }
  }
}

function causes(err: unknown): string {
  const out: string[] = [];
  for (let e: unknown = err; e; e = (e as { cause?: unknown }).cause) out.push(`${(e as { type?: string }).type ?? ''} ${(e as Error).message ?? String(e)}`);
  return out.join(' <- ');
}

/** Quiesced, the guest thawed, the snapshot clean by the oracle; the run's kept snapshot then removed. */
async function expectQuiescedAndTrue(h: Harness, domain: string, r: SnapshotResult): Promise<void> {
  try {
    expect(r.quiesced).toBe(true);
    expect(r.freezeWindowMs).toBeGreaterThan(0);
    expect(await freezeStatus(h.vars, domain)).toBe('thawed');
    expect(await quiescedTruthViolations(h.vars, r)).toEqual([]);
  } finally {
    for (const d of r.disks) {
      const [spec, snap] = d.snapshot.split('@') as [string, string];
      const [pool, image] = spec.split('/') as [string, string];
      await ceph.rbd('snap', 'rm', `${pool}/${image}@${snap}`).catch(() => undefined);
      await ceph.dropOwnerRecord(pool, `${image}@${snap}`);
    }
  }
}

/** A bound the pre-flush keeps whatever the guest does: its wait plus one agent call's limit. */
function expectWithinBound(r: SnapshotResult, waitMs: number): void {
  expect(r.preFlush!.ms).toBeLessThanOrEqual(waitMs + PRE_FLUSH_CALL_TIMEOUT_MS);
}

describe('pre-flush on the real guest', () => {
  it('runs in the guest and has finished before the agent starts the freeze', async () => {
    // The default command, wrapped to leave a mark on the guest's console with the guest's clock,
    // beside the fsfreeze hook's own "HOOK freeze begin" line: the guest's word on the order.
    const h = await worker({ preFlushTimeoutMs: 5000, preFlushCommand: busyboxSh('sync && echo "PREFLUSH done $EPOCHREALTIME" > /dev/ttyS0') });
    const dom = await lv.lookupDomainByName(g1);
    const since = Date.now();
    await dirtyGuest(lv, dom, 16, 0);
    const r = await snapshot(h, g1);
    await expectQuiescedAndTrue(h, g1, r);
    expect(r.preFlush).toMatchObject({ outcome: 'done' });
    const marks = await until(
      'the pre-flush mark and the freeze hook on the console',
      async () => {
        const lines = consoleLines(g1, since);
        const pre = lines.find((l) => l.text.startsWith('PREFLUSH done '));
        const hook = pre && lines.find((l) => l.text.startsWith('HOOK freeze begin ') && l.hostMs >= pre.hostMs);
        return pre && hook ? { pre, hook } : undefined;
      },
      10_000,
    );
    expect(guestTime(marks.pre.text)).toBeLessThan(guestTime(marks.hook.text));
  });

  it('with the default settings (sync, 1 s) it finishes on a guest with 16 MiB dirty, and the run is quiesced', async () => {
    const h = (defaults = await worker({}));
    expect(h.config.preFlushCommand).toEqual(['sync']);
    await dirtyGuest(lv, await lv.lookupDomainByName(g1), 16, 0);
    const r = await snapshot(h, g1);
    await expectQuiescedAndTrue(h, g1, r);
    expect(r.preFlush).toMatchObject({ outcome: 'done' });
    expectWithinBound(r, 1000);
  });

  // The failure the refused and the hanging cases already prove in the default lane, by another cause.
  extendedIt('a missing command fails the pre-flush, not the run: it freezes at once and is quiesced', async () => {
    const h = await worker({ preFlushTimeoutMs: 1000, preFlushCommand: ['/nonexistent/vmsnap-flush'] });
    const r = await snapshot(h, g1);
    await expectQuiescedAndTrue(h, g1, r);
    expect(r.preFlush).toMatchObject({ outcome: 'failed', error: expect.stringMatching(/vmsnap-flush.*(No such file|Failed to execute)/) });
    expectWithinBound(r, 1000);
  });

  it('a command that hangs is left behind at its bound: the run freezes then and is quiesced', async () => {
    const h = await worker({ preFlushTimeoutMs: 800, preFlushCommand: ['/bin/busybox', 'sleep', '5'] });
    const r = await snapshot(h, g1);
    await expectQuiescedAndTrue(h, g1, r);
    expect(r.preFlush).toMatchObject({ outcome: 'timeout' });
    expect(r.preFlush!.ms).toBeGreaterThanOrEqual(800);
    expectWithinBound(r, 800);
  });

  describe('a guest whose agent blocks guest-exec (qemu-ga --block-rpcs, as some distributions ship it)', () => {
    let scratch: ScratchGuest | undefined;
    afterAll(async () => {
      await scratch?.remove();
    });

    it('the pre-flush is refused, the run freezes anyway and is quiesced', async () => {
      const h = defaults ?? (await worker({}));
      scratch = await startScratchGuest(env, g1);
      const dom = await lv.lookupDomainByName(scratch.name);
      // The guest's own agent restarted with guest-exec blocked: the last guest-exec it runs.
      const agent = 'qemu-ga -m virtio-serial -p /dev/virtio-ports/org.qemu.guest_agent.0 -t /run -F/etc/qemu/fsfreeze-hook -l /run/qemu-ga.log';
      await runInGuest(lv, dom, busyboxSh(`setsid sh -c 'sleep 1; kill $(cat /run/qemu-ga.pid); sleep 1; ${agent} -b guest-exec & echo $! > /run/qemu-ga.pid' </dev/null >/dev/null 2>&1 &`), { timeoutMs: 20_000 });
      await until(
        `${scratch.name}'s agent to come back with guest-exec blocked`,
        async () => /disabled/.test(await lv.guestExec(dom, ['true'], 3).then(() => '', (e: unknown) => String(e))),
        60_000,
        500,
      );
      const r = await snapshot(h, scratch.name);
      await expectQuiescedAndTrue(h, scratch.name, r);
      expect(r.preFlush).toMatchObject({ outcome: 'failed', error: expect.stringMatching(/guest-exec.*disabled/) });
      expectWithinBound(r, h.config.preFlushTimeoutMs);
    });
  });
});

function consoleLines(guest: string, sinceMs: number): { hostMs: number; text: string }[] {
  return readFileSync(ticksPath(env.guests!.probeDir, guest), 'utf8')
    .split('\n')
    .map((l) => /^(\d+) (.*)$/.exec(l))
    .filter((m): m is RegExpExecArray => !!m)
    .map((m) => ({ hostMs: Number(m[1]) / 1000, text: m[2]! }))
    .filter((l) => l.hostMs >= sinceMs);
}

function guestTime(line: string): number {
  return Number(/ (\d+\.\d+)/.exec(line)![1]);
}
