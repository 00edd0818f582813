import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CliError, run } from '../../support/lab/cli-tools';
import { loadLabEnv } from '../../support/lab/env';
import type { LabHostEnv } from '../../support/lab/env';
import { ctlSocketPath, guestCtl } from '../../support/lab/guest-ctl';
import { readTicks } from '../../support/lab/probe';
import type { SnapshotResult } from '../../src/model/types';
import { CephView } from '../helpers/ceph-inspect';
import { startHarness, uniqueId } from '../helpers/harness';
import type { Harness } from '../helpers/harness';
import { quiescedTruthViolations } from '../helpers/truth';

// The lab's two hypervisor hosts (lab/libvirt.sh) and moves between them (lab/migrate.sh).
const env = loadLabEnv();
const hosts = env.hosts;
const guestB = env.guests?.hostB;
const migrateSh = env.guests?.migrate;
if (!hosts || !guestB || !migrateSh) throw new Error(`the lab env in ${env.dir} has no host B: run npm run lab:up`);
const ROOT = path.resolve(__dirname, '../..');
/** lab/migrate.sh's exit status for a guest that crashed after the move (TCG), not a vmsnap verdict. */
const LAB_CRASH = 3;

function virshOn(host: LabHostEnv, args: readonly string[]) {
  return run('virsh', ['-q', '-c', host.libvirt.uri, ...args]);
}

async function runningOn(host: LabHostEnv): Promise<string[]> {
  const { stdout } = await virshOn(host, ['list', '--name', '--state-running']);
  return stdout.split('\n').map((s) => s.trim()).filter(Boolean);
}

async function agentOn(host: LabHostEnv, domain: string, execute: string): Promise<unknown> {
  const { stdout } = await virshOn(host, ['qemu-agent-command', '--timeout', '10', domain, JSON.stringify({ execute })]);
  return (JSON.parse(stdout) as { return: unknown }).return;
}

/** TCP listeners in the libvirtds' migration port ranges (lab/libvirt.sh), as `addr:port`. */
async function migrationListeners(): Promise<string[]> {
  const { stdout } = await run('ss', ['-Hltn', 'sport >= :49152 and sport <= :49215']);
  return stdout.split('\n').filter(Boolean).map((line) => line.trim().split(/\s+/)[3] as string);
}

interface Move {
  code: number;
  out: string;
  /** Every migration listener seen while the move ran. */
  listeners: string[];
}

/** lab/migrate.sh GUEST TO, with the migration listeners sampled every 50 ms while it runs. */
async function migrate(domain: string, to: 'a' | 'b'): Promise<Move> {
  const seen = new Set<string>();
  let done = false;
  const sampling = (async () => {
    while (!done) {
      for (const l of await migrationListeners()) seen.add(l);
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  try {
    const { stdout } = await run('bash', [migrateSh!, domain, to], 120_000);
    return { code: 0, out: stdout, listeners: [...seen] };
  } catch (err) {
    if (!(err instanceof CliError)) throw err;
    return { code: err.exitCode ?? -1, out: `${err.message}\n${err.stderr}`, listeners: [...seen] };
  } finally {
    done = true;
    await sampling;
  }
}

/** The guest is running on `on` only, its agent answers there, its control channel and probe follow it. */
async function expectHealthyOn(domain: string, on: LabHostEnv, off: LabHostEnv): Promise<void> {
  expect(await runningOn(on)).toContain(domain);
  const { stdout } = await virshOn(off, ['list', '--all', '--name']);
  expect(stdout).not.toContain(domain); // the persistent definition moved too
  expect(await agentOn(on, domain, 'guest-ping')).toEqual({});
  expect(await agentOn(on, domain, 'guest-fsfreeze-status')).toBe('thawed');
  const reply = await guestCtl(ctlSocketPath(env.guests!.probeDir, domain), { command: 'status' });
  expect(reply.ok).toBe(true);
  const since = Date.now();
  await new Promise((r) => setTimeout(r, 1500));
  expect((await readTicks(domain, since)).length).toBeGreaterThanOrEqual(3);
}

describe('two lab hypervisor hosts', () => {
  let h: Harness | undefined;
  const ceph = new CephView(env.raw);

  afterAll(async () => {
    await h?.stop();
  });

  it('two private libvirtds with distinct host UUIDs; the host-B guest runs on host B', async () => {
    const uuids: string[] = [];
    for (const host of [hosts.a, hosts.b]) {
      const { stdout } = await virshOn(host, ['capabilities']);
      const uuid = /<host>\s*<uuid>([0-9a-f-]+)<\/uuid>/.exec(stdout)?.[1];
      expect(uuid).toBe(host.hostUuid);
      uuids.push(uuid!);
    }
    expect(uuids[0]).not.toBe(uuids[1]);
    expect(hosts.a.name).not.toBe(hosts.b.name);
    expect(hosts.b.guests).toEqual([guestB]);
    expect(await runningOn(hosts.b)).toContain(guestB);
    const onA = await runningOn(hosts.a);
    expect(onA).not.toContain(guestB);
    for (const g of hosts.a.guests) expect(onA).toContain(g);
  });

  it("host B runs QEMU as Debian's libvirt-qemu (host A as root); every disk opens as client.qemu with a libvirt secret, no keyring", async () => {
    expect(hosts.a.qemuUser).toBe('root');
    expect(hosts.b.qemuUser).toBe('libvirt-qemu');
    for (const host of [hosts.a, hosts.b]) {
      const uid = Number((await run('id', ['-u', host.qemuUser])).stdout.trim());
      for (const domain of await runningOn(host)) {
        const pid = readFileSync(path.join(host.libvirt.statusDir!, `${domain}.pid`), 'utf8').trim();
        const status = readFileSync(`/proc/${pid}/status`, 'utf8');
        expect(/^Uid:\s+(\d+)\s+(\d+)/m.exec(status)?.slice(1).map(Number), `${domain} on ${host.name}`).toEqual([uid, uid]);
        const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
        const rbd = argv.filter((a) => a.includes('"driver":"rbd"'));
        expect(rbd.length, `${domain}'s RBD disks`).toBeGreaterThan(0);
        for (const a of rbd) {
          expect(a).toContain('"user":"qemu"');
          expect(a).toMatch(/"key-secret":"[^"]+"/);
        }
      }
    }
  });

  it("a snapshot of the host-B guest through host B's worker queue is quiesced, and truly so", async () => {
    h = await startHarness({ host: hosts.b.name, labHost: 'b' });
    expect(h.hw.taskQueue).toBe(`vmsnap-${hosts.b.name}`);
    const result: SnapshotResult = await h.client.workflow.execute('consistentSnapshot', {
      taskQueue: h.hw.taskQueue,
      workflowId: uniqueId('hostb'),
      args: [{ domain: guestB, quiesce: 'require', verify: true }],
    });
    try {
      expect(result.quiesced).toBe(true);
      expect(result.frozenFilesystems).toBe(1);
      expect(await quiescedTruthViolations(env.raw, result)).toEqual([]);
      expect(await agentOn(hosts.b, guestB, 'guest-fsfreeze-status')).toBe('thawed');
    } finally {
      for (const d of result.disks) if (d.image) await ceph.removeImage(d.image.split('/')[0]!, d.image.split('/')[1]!);
    }
  });

  it('live migration B -> A -> B: the agent answers and the probe ticks on each destination, migration on loopback only', async () => {
    const crashes: string[] = [];
    // TCG live migration crashed the guest kernel in 2 of 37 moves on this kind of machine (lab
    // notes): a crash is a lab artefact, so the guest is recreated and the round trip tried once more.
    for (let attempt = 1; ; attempt++) {
      let crashed = false;
      for (const [to, from] of [
        ['a', 'b'],
        ['b', 'a'],
      ] as const) {
        const move = await migrate(guestB, to);
        if (move.code === LAB_CRASH) {
          crashes.push(move.out);
          crashed = true;
          break;
        }
        expect(move.code, move.out).toBe(0);
        expect(move.out).toMatch(new RegExp(`live ${hosts[from].name} -> ${hosts[to].name}: migrate`));
        // The destination QEMU listened for the migration stream on loopback only.
        expect(move.listeners.length).toBeGreaterThan(0);
        for (const l of move.listeners) expect(l).toMatch(/^127\.0\.0\.1:\d+$/);
        await expectHealthyOn(guestB, hosts[to], hosts[from]);
      }
      if (!crashed) break;
      await run('bash', [path.join(ROOT, 'lab/guests.sh'), 'recreate', guestB], 400_000);
      if (attempt === 2) throw new Error(`lab crash (TCG) in both attempts, not a vmsnap verdict:\n${crashes.join('\n')}`);
    }
    if (crashes.length) console.warn(`lab crash (recreated the guest and retried):\n${crashes.join('\n')}`);
  });
});
