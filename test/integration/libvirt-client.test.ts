/**
 * LibvirtClient against the lab's libvirtd and guests. The guests are shared with other test
 * files: every test that freezes or hangs something undoes it in afterEach.
 */
import { readFile } from 'node:fs/promises';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  isAgentNotConfigured,
  isAgentUnresponsive,
  isFrozenState,
  isNoDomain,
  LibvirtClient,
  LibvirtConnectionError,
  parseDomainXml,
  type DomainRef,
} from '../../src/libvirt';
import { guestCtlScript, libvirtd, loadLibvirtLab, type LibvirtLab } from '../../support/lab/libvirt';

let lab: LibvirtLab;
let client: LibvirtClient;
let g1: DomainRef;
let g3: DomainRef;
const hungAgents = new Set<string>();

/** Freeze status as the agent reports it; after an 86 the freeze may land late, so poll. */
async function thawUntilThawed(c: LibvirtClient, dom: DomainRef, deadlineMs = 30_000): Promise<void> {
  const until = Date.now() + deadlineMs;
  for (;;) {
    await c.fsThaw(dom, [], { timeoutMs: 15_000 }).catch(() => undefined);
    const status = await c.fsFreezeStatus(dom, 5).catch((e: Error) => `unknown (${e.message})`);
    if (status === 'thawed') return;
    if (Date.now() > until) throw new Error(`${dom.name} still ${status} after ${deadlineMs} ms`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function hangAgent(guest: string): Promise<void> {
  hungAgents.add(guest);
  expect(await guestCtlScript(guest, 'hang-agent')).toMatch(/agent=stopped/);
}

beforeAll(async () => {
  lab = loadLibvirtLab();
  client = await LibvirtClient.connect({ uri: lab.uri });
});

// Per test, by name: other suites share the guests and may recreate them (new UUID).
beforeEach(async () => {
  g1 = await client.lookupDomainByName(lab.guest1);
  g3 = await client.lookupDomainByName(lab.guest3);
  await client.guestPing(g1, 30);
  await client.guestPing(g3, 30);
});

afterEach(async () => {
  for (const guest of hungAgents) await guestCtlScript(guest, 'resume-agent');
  hungAgents.clear();
  const c = await LibvirtClient.connect({ uri: lab.uri });
  try {
    // By name: a guest recreated meanwhile (lab/guests.sh recreate) has a new UUID.
    for (const name of [lab.guest1, lab.guest3]) {
      const dom = await c.lookupDomainByName(name);
      await c.setAgentResponseTimeout(dom, -2); // libvirt 9.0's initial value: block
      await thawUntilThawed(c, dom);
    }
  } finally {
    await c.close();
  }
});

afterAll(async () => {
  await client?.close();
});

describe('lookups, state, XML', () => {
  it('connects by URI and by socket path; looks domains up by name and UUID', async () => {
    const bySocket = await LibvirtClient.connect({ socketPath: lab.socket });
    try {
      const dom = await bySocket.lookupDomainByName(lab.guest1);
      expect(dom).toEqual(g1);
      expect(dom.uuid).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
      expect(dom.id).toBeGreaterThan(0);
      expect(await bySocket.lookupDomainByUuid(dom.uuid)).toEqual(dom);
      expect(await bySocket.lookupDomain(dom.uuid.toUpperCase())).toEqual(dom);
      expect(await bySocket.lookupDomain(lab.guest1)).toEqual(dom);
    } finally {
      await bySocket.close();
    }
  });

  it('lists active domains and reads their state', async () => {
    const names = (await client.listDomains()).map((d) => d.name);
    expect(names).toEqual(expect.arrayContaining([lab.guest1, lab.guest3, lab.guestNoAgent]));
    expect(await client.getDomainState(g1)).toMatchObject({ state: 'running' });
  });

  it('reads domain XML: RBD disks and the agent channel', async () => {
    const info1 = parseDomainXml(await client.getDomainXml(g1));
    expect(info1).toMatchObject({ name: lab.guest1, uuid: g1.uuid, hasAgentChannel: true });
    expect(info1.disks.filter((d) => d.rbd)).toHaveLength(1);
    const info3 = parseDomainXml(await client.getDomainXml(g3, { inactive: true }));
    expect(info3.disks.filter((d) => d.rbd)).toHaveLength(3);
    for (const d of info3.disks.filter((x) => x.rbd)) expect(d.rbd).toMatchObject({ pool: expect.any(String), image: expect.any(String) });
    const noAgent = await client.lookupDomainByName(lab.guestNoAgent);
    expect(parseDomainXml(await client.getDomainXml(noAgent)).hasAgentChannel).toBe(false);
  });

  it('unknown domain: 42 by name and by UUID', async () => {
    expect(isNoDomain(await client.lookupDomainByName('vmsnap-no-such-domain').catch((e: unknown) => e))).toBe(true);
    expect(isNoDomain(await client.lookupDomainByUuid('00000000-0000-4000-8000-000000000000').catch((e: unknown) => e))).toBe(true);
  });
});

describe('freeze and thaw', () => {
  it('agent commands: guest-ping and guest-fsfreeze-status', async () => {
    await client.guestPing(g1);
    expect(await client.fsFreezeStatus(g1)).toBe('thawed');
    expect(await client.qemuAgentCommand(g1, '{"execute":"guest-ping"}', 5)).toEqual({});
  });

  it('freeze, freeze twice (1, frozen state), thaw, thaw when not frozen (0)', async () => {
    await client.setAgentResponseTimeout(g1, 10);
    const frozen = await client.fsFreeze(g1);
    expect(frozen).toBeGreaterThan(0);
    expect(await client.fsFreezeStatus(g1)).toBe('frozen');
    const twice = await client.fsFreeze(g1).catch((e: unknown) => e);
    expect(isFrozenState(twice)).toBe(true);
    expect(await client.fsFreezeStatus(g1)).toBe('frozen'); // still frozen after the failed second freeze
    expect(await client.fsThaw(g1)).toBe(frozen);
    expect(await client.fsThaw(g1)).toBe(0);
    expect(await client.fsFreezeStatus(g1)).toBe('thawed');
  });

  it('freezes all disks of the 3-disk guest, or only the mountpoints asked for', async () => {
    const n = await client.fsFreeze(g3);
    expect(n).toBeGreaterThanOrEqual(3);
    expect(await client.fsThaw(g3)).toBe(n);
    expect(await client.fsFreeze(g3, ['/no/such/mountpoint'])).toBe(0); // nothing frozen, no error
    expect(await client.fsFreezeStatus(g3)).toBe('thawed');
    expect(await client.fsFreeze(g3, ['/mnt/vdc'])).toBe(1);
    expect(await client.fsFreezeStatus(g3)).toBe('frozen');
    expect(await client.fsThaw(g3)).toBe(1);
  });

  it('guest without an agent channel: 74 "QEMU guest agent is not configured"', async () => {
    const noAgent = await client.lookupDomainByName(lab.guestNoAgent);
    const err = await client.fsFreeze(noAgent).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 74 });
    expect(isAgentNotConfigured(err)).toBe(true);
  });

  it('hung agent with a 2 s agent timeout: freeze fails with 86, and the guest is thawed after', async () => {
    await client.setAgentResponseTimeout(g1, 2);
    await hangAgent(lab.guest1);
    const started = Date.now();
    const err = await client.fsFreeze(g1, [], { timeoutMs: 20_000 }).catch((e: unknown) => e);
    expect(isAgentUnresponsive(err)).toBe(true);
    expect(Date.now() - started).toBeLessThan(10_000);
    // The freeze was delivered before the timeout and may still happen once qemu-ga wakes.
    await guestCtlScript(lab.guest1, 'resume-agent');
    hungAgents.delete(lab.guest1);
    await thawUntilThawed(client, g1);
  });
});

describe('the event loop stays free', () => {
  it('8 concurrent calls against a hung agent do not delay fs.readFile or other libvirt calls', async () => {
    await hangAgent(lab.guest3);
    const outcomes: string[] = [];
    // -2: libvirtd blocks until qemu-ga answers, so these stay in flight for the whole test.
    const blocked = Array.from({ length: 8 }, () =>
      client.qemuAgentCommand(g3, { execute: 'guest-ping' }, -2, { timeoutMs: 120_000 }).then(
        () => void outcomes.push('ok'),
        (e: Error) => void outcomes.push(e.message),
      ),
    );
    await new Promise((r) => setTimeout(r, 300));

    const readTimes: number[] = [];
    for (let i = 0; i < 20; i++) {
      const t0 = performance.now();
      await readFile(__filename);
      readTimes.push(performance.now() - t0);
    }
    const t0 = performance.now();
    expect(await client.getDomainState(g1)).toMatchObject({ state: 'running' });
    await client.lookupDomainByName(lab.guest1);
    const otherCallMs = performance.now() - t0;

    console.info(`hung agent: readFile max ${Math.max(...readTimes).toFixed(1)} ms, other libvirt calls ${otherCallMs.toFixed(1)} ms`);
    expect(outcomes).toEqual([]); // all 8 were still hung while we measured
    // A binding that parks libuv threads on the agent delays readFile by seconds (lab notes: 6 s).
    expect(Math.max(...readTimes)).toBeLessThan(250);
    expect(otherCallMs).toBeLessThan(1_000);

    await guestCtlScript(lab.guest3, 'resume-agent');
    hungAgents.delete(lab.guest3);
    await Promise.all(blocked);
    expect(outcomes).toEqual(Array(8).fill('ok'));
  });
});

describe('libvirtd restarts', () => {
  it('fails in-flight calls, reconnects on the next call and thaws a guest frozen before the restart', async () => {
    const c = await LibvirtClient.connect({ uri: lab.uri });
    try {
      await hangAgent(lab.guest3);
      const inFlight = c.qemuAgentCommand(g3, { execute: 'guest-ping' }, -2, { timeoutMs: 60_000 }).catch((e: unknown) => e);
      const frozen = await c.fsFreeze(g1);
      expect(frozen).toBeGreaterThan(0);

      await libvirtd('kill');
      expect(await inFlight).toBeInstanceOf(LibvirtConnectionError);
      expect(await c.lookupDomainByName(lab.guest1).catch((e: unknown) => e)).toBeInstanceOf(LibvirtConnectionError);
      await libvirtd('start');

      await guestCtlScript(lab.guest3, 'resume-agent');
      hungAgents.delete(lab.guest3);
      expect(await c.fsFreezeStatus(g1)).toBe('frozen'); // a restart does not thaw
      expect(await c.fsThaw(g1)).toBe(frozen);
      expect(await c.fsFreezeStatus(g1)).toBe('thawed');
    } finally {
      await libvirtd('start').catch(() => undefined);
      await c.close();
    }
    // The long-lived client reconnects too.
    expect(await client.lookupDomainByName(lab.guest1)).toEqual(g1);
  });
});

describe('connection lifecycle', () => {
  it('keeps a connection alive with its own keepalive and closes cleanly', async () => {
    const c = await LibvirtClient.connect({ uri: lab.uri, keepaliveIntervalMs: 200 });
    await new Promise((r) => setTimeout(r, 1_500));
    expect(await c.lookupDomainByName(lab.guest1)).toEqual(g1);
    await c.close();
    await expect(c.listDomains()).rejects.toBeInstanceOf(LibvirtConnectionError);
  });
});
