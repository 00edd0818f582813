import { describe, expect, it } from 'vitest';
import {
  isAgentNotConfigured,
  isAgentUnresponsive,
  isNoDomain,
  LibvirtClient,
  LibvirtConnectionError,
  LibvirtTimeoutError,
  type DomainRef,
} from '../../src/libvirt';
import { readDomain } from '../../src/libvirt/domain-ref';
import { decodeFrame, encodeFrame, MessageType } from '../../src/libvirt/packet';
import { KEEPALIVE_PROGRAM, KeepaliveProcedure, RemoteProcedure } from '../../src/libvirt/procedures';
import { XdrReader, XdrWriter } from '../../src/libvirt/xdr';
import { loadFrames } from '../fixtures/libvirt/frames';
import { ManualPeer, ReplayPeer } from '../fixtures/libvirt/replay';

const AGENT: DomainRef = { name: 'rec-agent', uuid: '6f1c2a4e-3b5d-4c7e-9a8b-1d2e3f405162', id: 1 };

async function replay(name: string, keepaliveIntervalMs?: number): Promise<{ client: LibvirtClient; peer: ReplayPeer }> {
  const peer = new ReplayPeer(loadFrames(name));
  const client = await LibvirtClient.connect({ dialer: async () => peer, keepaliveIntervalMs });
  return { client, peer };
}

function expectReplayedExactly(peer: ReplayPeer): void {
  expect(peer.mismatches).toEqual([]);
  expect(peer.done).toBe(true);
}

describe('LibvirtClient against recorded libvirtd conversations', () => {
  it('connect, lookups, state, list and close send the recorded bytes and decode the replies', async () => {
    const { client, peer } = await replay('connect-lookup');
    const dom = await client.lookupDomainByName('rec-agent');
    expect(dom).toEqual(AGENT);
    expect(await client.lookupDomain(dom.uuid)).toEqual(AGENT);
    expect(await client.getDomainState(dom)).toEqual({ state: 'running', reason: 1 });
    expect((await client.listDomains()).map((d) => d.name)).toEqual(['rec-agent', 'rec-noagent']);
    await client.close();
    expectReplayedExactly(peer);
  });

  it('returns the domain XML', async () => {
    const { client, peer } = await replay('domain-xml');
    const xml = await client.getDomainXml(await client.lookupDomainByName('rec-rbd'), { inactive: true });
    expect(xml).toMatch(/^<domain type='qemu'>/);
    expect(xml).toContain("<source protocol='rbd' name='vmsnap/g1-root'>");
    await client.close();
    expectReplayedExactly(peer);
  });

  it('turns error replies into LibvirtError with the recorded codes', async () => {
    const { client, peer } = await replay('errors');
    const noDomain = await client.lookupDomainByName('vmsnap-no-such-domain').catch((e: unknown) => e);
    expect(isNoDomain(noDomain)).toBe(true);
    const noAgent = await client.fsFreeze(await client.lookupDomainByName('rec-noagent')).catch((e: unknown) => e);
    expect(isAgentNotConfigured(noAgent)).toBe(true);
    const notConnected = await client.fsFreeze(await client.lookupDomainByName('rec-agent')).catch((e: unknown) => e);
    expect(isAgentUnresponsive(notConnected)).toBe(true);
    await client.close();
    expectReplayedExactly(peer);
  });

  it('freeze, freeze again, status and thaws decode as libvirt answered them', async () => {
    const { client, peer } = await replay('freeze-thaw');
    const dom = await client.lookupDomainByName('rec-g1');
    await client.setAgentResponseTimeout(dom, 5);
    await client.guestPing(dom);
    const frozen = await client.fsFreeze(dom);
    expect(frozen).toBeGreaterThan(0);
    await expect(client.fsFreeze(dom)).rejects.toMatchObject({ code: 1, message: expect.stringMatching(/frozen state/) });
    expect(await client.fsFreezeStatus(dom)).toBe('frozen');
    expect(await client.fsThaw(dom)).toBe(frozen);
    expect(await client.fsThaw(dom)).toBe(0);
    expect(await client.fsFreezeStatus(dom)).toBe('thawed');
    await client.close();
    expectReplayedExactly(peer);
  });

  it('advertises keepalive and answers libvirtd\'s PING with PONG', async () => {
    const { client, peer } = await replay('keepalive', 60_000);
    await new Promise((r) => setTimeout(r, 10));
    await client.close();
    expectReplayedExactly(peer);
  });
});

describe('LibvirtClient dispatch (fake libvirtd)', () => {
  const lookupReply = (dom: DomainRef): Buffer => {
    const w = new XdrWriter().string(dom.name).fixedOpaque(Buffer.from(dom.uuid.replace(/-/g, ''), 'hex')).int(dom.id);
    return w.toBuffer();
  };
  const nameOf = (payload: Buffer): string => new XdrReader(payload).string();

  async function connectManual(opts: { maxCallsPerConnection?: number; maxConnections?: number } = {}): Promise<{ client: LibvirtClient; peers: ManualPeer[] }> {
    const peers: ManualPeer[] = [];
    const client = await LibvirtClient.connect({
      ...opts,
      dialer: async () => {
        const p = new ManualPeer();
        peers.push(p);
        return p;
      },
    });
    return { client, peers };
  }

  it('matches concurrent replies to calls by serial, whatever their order', async () => {
    const { client, peers } = await connectManual();
    const names = ['a', 'b', 'c', 'd'];
    const results = Promise.all(names.map((n) => client.lookupDomainByName(n)));
    await peers[0].waitForCalls(4);
    const serials = peers[0].calls.map((c) => c.header.serial);
    expect(new Set(serials).size).toBe(4);
    for (const call of [...peers[0].calls].reverse()) {
      const n = nameOf(call.payload);
      peers[0].reply(call, lookupReply({ name: n, uuid: AGENT.uuid, id: n.charCodeAt(0) }));
    }
    expect((await results).map((d) => [d.name, d.id])).toEqual(names.map((n) => [n, n.charCodeAt(0)]));
    await client.close();
  });

  it('opens another connection when every connection has maxCallsPerConnection calls in flight', async () => {
    // libvirtd leaves a 6th call on a connection unread while 5 are in flight (max_client_requests).
    const { client, peers } = await connectManual({ maxCallsPerConnection: 2, maxConnections: 3 });
    const calls = ['a', 'b', 'c', 'd', 'e', 'f', 'g'].map((n) => client.lookupDomainByName(n));
    await new Promise((r) => setTimeout(r, 10));
    expect(peers.map((p) => p.calls.length)).toEqual([3, 2, 2]); // the cap reached, the least busy takes the 7th
    for (const p of peers) for (const c of p.calls) p.reply(c, lookupReply({ name: nameOf(c.payload), uuid: AGENT.uuid, id: 1 }));
    expect((await Promise.all(calls)).map((d) => d.name).join('')).toBe('abcdefg');
    await client.close();
    expect(peers.every((p) => p.written.at(-1)!.header.procedure === RemoteProcedure.CONNECT_CLOSE)).toBe(true);
  });

  it('times out one call without disturbing others and ignores its late reply', async () => {
    const { client, peers } = await connectManual();
    const slow = client.lookupDomainByName('slow', { timeoutMs: 30 });
    await expect(slow).rejects.toBeInstanceOf(LibvirtTimeoutError);
    const fast = client.lookupDomainByName('fast');
    await peers[0].waitForCalls(2);
    peers[0].reply(peers[0].calls[0], lookupReply({ name: 'slow', uuid: AGENT.uuid, id: 7 })); // late: dropped
    peers[0].reply(peers[0].calls[1], lookupReply({ name: 'fast', uuid: AGENT.uuid, id: 8 }));
    expect(await fast).toMatchObject({ name: 'fast', id: 8 });
    await client.close();
  });

  it('rejects a call whose AbortSignal fires', async () => {
    const { client } = await connectManual();
    const ac = new AbortController();
    const call = client.lookupDomainByName('x', { signal: ac.signal });
    ac.abort(new Error('cancelled by activity'));
    await expect(call).rejects.toThrow('cancelled by activity');
    await client.close();
  });

  it('fails in-flight calls with LibvirtConnectionError when libvirtd goes away, then reconnects', async () => {
    const { client, peers } = await connectManual();
    const inFlight = client.fsThaw(AGENT);
    await peers[0].waitForCalls(1);
    peers[0].hangUp();
    await expect(inFlight).rejects.toBeInstanceOf(LibvirtConnectionError);

    const next = client.fsThaw(AGENT);
    await new Promise((r) => setTimeout(r, 0));
    expect(peers).toHaveLength(2);
    await peers[1].waitForCalls(1);
    // The new connection authenticates again (libvirtd keeps that per connection), then opens.
    expect(peers[1].written.slice(0, 2).map((f) => decodeFrame(encodeFrame(f.header)).header.procedure)).toEqual([RemoteProcedure.AUTH_LIST, RemoteProcedure.CONNECT_OPEN]);
    peers[1].reply(peers[1].calls[0], new XdrWriter().int(2).toBuffer());
    expect(await next).toBe(2);
    await client.close();
  });

  it('answers a server PING with a PONG on the keepalive program', async () => {
    const { client, peers } = await connectManual();
    peers[0].push(encodeFrame({ program: KEEPALIVE_PROGRAM, version: 1, procedure: KeepaliveProcedure.PING, type: MessageType.Message, serial: 0, status: 0 }));
    await new Promise((r) => setTimeout(r, 10));
    expect(peers[0].written.at(-1)!.header).toEqual({ program: KEEPALIVE_PROGRAM, version: 1, procedure: KeepaliveProcedure.PONG, type: MessageType.Message, serial: 0, status: 0 });
    await client.close();
  });

  it('encodes the domain ref, mountpoints and agent command arguments as the .x files define them', async () => {
    const { client, peers } = await connectManual();
    const freeze = client.fsFreeze(AGENT, ['/', '/data']);
    const agent = client.qemuAgentCommand(AGENT, { execute: 'guest-ping' }, 3);
    await peers[0].waitForCalls(2);
    const [f, a] = peers[0].calls;
    const fr = new XdrReader(f.payload);
    expect(readDomain(fr)).toEqual(AGENT);
    expect(fr.array((r) => r.string())).toEqual(['/', '/data']);
    expect(fr.uint()).toBe(0);
    fr.end();
    const ar = new XdrReader(a.payload);
    expect(readDomain(ar)).toEqual(AGENT);
    expect([ar.string(), ar.int(), ar.uint()]).toEqual(['{"execute":"guest-ping"}', 3, 0]);
    peers[0].reply(f, new XdrWriter().int(2).toBuffer());
    peers[0].reply(a, new XdrWriter().optionalString('{"return":{}}').toBuffer());
    expect(await freeze).toBe(2);
    expect(await agent).toEqual({});
    await client.close();
  });

  it('refuses calls after close()', async () => {
    const { client, peers } = await connectManual();
    await client.close();
    expect(peers[0].written.at(-1)!.header.procedure).toBe(RemoteProcedure.CONNECT_CLOSE);
    await expect(client.lookupDomainByName('x')).rejects.toBeInstanceOf(LibvirtConnectionError);
  });

  it('reports a dial failure as LibvirtConnectionError', async () => {
    await expect(LibvirtClient.connect({ socketPath: '/nonexistent/libvirt-sock' })).rejects.toBeInstanceOf(LibvirtConnectionError);
  });
});
