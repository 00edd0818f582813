/**
 * Latency of lookup / freeze / thaw through LibvirtClient (one connection, kept open) versus one
 * `virsh` process per call, measured interleaved in the same run against the lab's guest.
 *   npx tsx bench/libvirt-latency.ts [iterations=20] [guest]
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { LibvirtClient } from '../src/libvirt';
import { loadLibvirtLab } from '../support/lab/libvirt';

const run = promisify(execFile);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

async function main(): Promise<void> {
  const iterations = Number(process.argv[2] ?? 20);
  const lab = loadLibvirtLab();
  const guest = process.argv[3] ?? lab.guest1;
  const virsh = (...args: string[]): Promise<unknown> => run('virsh', ['-q', '-c', lab.uri, ...args]);
  const client = await LibvirtClient.connect({ uri: lab.uri });
  const dom = await client.lookupDomainByName(guest);
  await client.setAgentResponseTimeout(dom, 10);
  const samples: Record<string, number[]> = {};
  const add = (k: string, ms: number): void => void (samples[k] ??= []).push(ms);
  try {
    for (let i = 0; i < iterations; i++) {
      add('lookup client', await timed(() => client.lookupDomainByName(guest)));
      add('lookup virsh', await timed(() => virsh('domuuid', guest)));
      add('freeze client', await timed(() => client.fsFreeze(dom)));
      add('thaw client', await timed(() => client.fsThaw(dom)));
      add('freeze virsh', await timed(() => virsh('domfsfreeze', guest)));
      add('thaw virsh', await timed(() => virsh('domfsthaw', guest)));
    }
  } finally {
    await client.fsThaw(dom).catch(() => undefined);
    await client.setAgentResponseTimeout(dom, -2).catch(() => undefined);
    console.log(`guest-fsfreeze-status after bench: ${await client.fsFreezeStatus(dom)}`);
    await client.close();
  }
  console.log(`${iterations} iterations against ${guest} (${lab.uri}); medians in ms`);
  console.log('op      client   virsh   virsh/client');
  for (const op of ['lookup', 'freeze', 'thaw']) {
    const c = median(samples[`${op} client`]);
    const v = median(samples[`${op} virsh`]);
    console.log(`${op.padEnd(7)} ${c.toFixed(1).padStart(6)} ${v.toFixed(1).padStart(7)}   ${(v / c).toFixed(1)}x`);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
