import { describe, expect, it } from 'vitest';
import { LibvirtClient, type DomainRef } from '../../src/libvirt';
import { readDomain } from '../../src/libvirt/domain-ref';
import { RemoteProcedure } from '../../src/libvirt/procedures';
import { XdrReader, XdrWriter } from '../../src/libvirt/xdr';
import { ManualPeer } from '../fixtures/libvirt/replay';

const DOM: DomainRef = { name: 'restored', uuid: '6f1c2a4e-3b5d-4c7e-9a8b-1d2e3f405162', id: -1 };

async function connect(): Promise<{ client: LibvirtClient; peer: () => ManualPeer }> {
  const peers: ManualPeer[] = [];
  const client = await LibvirtClient.connect({
    dialer: async () => {
      const p = new ManualPeer();
      peers.push(p);
      return p;
    },
  });
  return { client, peer: () => peers[0] };
}

describe('LibvirtClient lifecycle procedures (define, create, shutdown, destroy, undefine)', () => {
  it('encodes each call as remote_protocol.x defines it and decodes the defined domain', async () => {
    const { client, peer } = await connect();
    const define = client.domainDefineXml('<domain/>');
    const create = client.domainCreate(DOM);
    const shutdown = client.domainShutdownFlags(DOM, { agent: true, acpi: true });
    const destroy = client.domainDestroy(DOM);
    const undefine = client.domainUndefineFlags(DOM);
    await peer().waitForCalls(5);
    const [d, c, s, x, u] = peer().calls;
    expect([d, c, s, x, u].map((k) => k.header.procedure)).toEqual([
      RemoteProcedure.DOMAIN_DEFINE_XML, // 11
      RemoteProcedure.DOMAIN_CREATE, // 9
      RemoteProcedure.DOMAIN_SHUTDOWN_FLAGS, // 258
      RemoteProcedure.DOMAIN_DESTROY, // 12
      RemoteProcedure.DOMAIN_UNDEFINE_FLAGS, // 231
    ]);
    const dr = new XdrReader(d.payload);
    expect(dr.string()).toBe('<domain/>');
    dr.end();
    for (const call of [c, x]) {
      const r = new XdrReader(call.payload);
      expect(readDomain(r)).toEqual(DOM);
      r.end();
    }
    const sr = new XdrReader(s.payload);
    expect(readDomain(sr)).toEqual(DOM);
    expect(sr.uint()).toBe(3); // VIR_DOMAIN_SHUTDOWN_ACPI_POWER_BTN | VIR_DOMAIN_SHUTDOWN_GUEST_AGENT
    const ur = new XdrReader(u.payload);
    expect(readDomain(ur)).toEqual(DOM);
    expect(ur.uint()).toBe(0);

    const uuid = Buffer.from(DOM.uuid.replace(/-/g, ''), 'hex');
    peer().reply(d, new XdrWriter().string('restored').fixedOpaque(uuid).int(-1).toBuffer());
    for (const call of [c, s, x, u]) peer().reply(call, Buffer.alloc(0));
    expect(await define).toEqual(DOM);
    await Promise.all([create, shutdown, destroy, undefine]);
    await client.close();
  });
});
