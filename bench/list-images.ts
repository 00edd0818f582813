/**
 * `vmsnap list` against a pool of 200 vmsnap images (100 two-disk image sets of one VM, each
 * image carrying its metadata and a restore record with a real-sized domain XML), timed end to
 * end as the operator runs it (a `vmsnap list --json` process), against a baseline measured in
 * the same run: `rbd ls --long` of the same pool (one process that opens every image for its
 * size, no metadata). Prints the medians, the ratio, and PASS or FAIL against the 2 s target
 * (the slowest run must be under it); FAIL exits 1, so the claim is checked wherever this runs.
 *
 *   npx tsx bench/list-images.ts [--images 200] [--runs 5]
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { createImage, openImage, RadosCluster, removeImage } from '../src/ceph';
import { loadLabEnv } from '../support/lab/env';
import { encodeRestorePoint, RESTORE_POINT_KEY } from '../src/model/restore-point';
import { META } from '../src/model/types';
import { quantile } from './stats';

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, '..');
const TARGET_MS = 2000;

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const opt = (name: string, d: number) => Number(args[args.indexOf(`--${name}`) + 1] ?? d) || d;
  const count = args.includes('--images') ? opt('images', 200) : 200;
  const runs = args.includes('--runs') ? opt('runs', 5) : 5;
  const env = loadLabEnv();
  const pool = env.pools.image;
  const tag = `benchlist${Date.now().toString(36)}`;
  const domain = `${tag}-vm`;
  const xml = readFileSync(path.join(ROOT, 'test/fixtures/libvirt/rec-rbd.xml'), 'utf8');
  const rados = await RadosCluster.connect({ conf: env.ceph.conf, id: env.ceph.adminId, keyring: env.ceph.adminKeyring });
  const io = await rados.openIoCtx(pool);
  const names: string[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const run = Math.floor(i / 2);
      const target = i % 2 ? 'vdc' : 'vdb';
      const name = `${tag}-${target}-${String(run).padStart(4, '0')}`;
      await createImage(io, name, 4 << 20);
      names.push(name);
      const img = await openImage(io, name);
      try {
        const at = new Date(Date.UTC(2026, 0, 1) + run * 3600_000).toISOString();
        const wf = `${tag}-run-${run}`;
        const meta: Record<string, string> = {
          [META.owner]: 'vmsnap', [META.image]: `${pool}/${name}`, [META.workflowId]: wf, [META.domain]: domain,
          [META.createdAt]: at, [META.state]: 'complete', [META.quiesced]: 'true', [`${META.labelPrefix}schedule`]: 'nightly',
          [RESTORE_POINT_KEY]: encodeRestorePoint({
            workflowId: wf, runId: 'r', domain: { name: domain, uuid: '6f1c2a4e-3b5d-4c7e-9a8b-1d2e3f405162' }, quiesced: true, recordedAt: at,
            disks: ['vdb', 'vdc'].map((t) => ({ target: t, image: `${pool}/${tag}-${t}-${String(run).padStart(4, '0')}`, source: `vms/${domain}-${t}` })),
            domainXml: xml,
          }),
        };
        for (const [k, v] of Object.entries(meta)) await img.setMetadata(k, v);
      } finally {
        await img.close();
      }
    }
    const cliEnv = {
      ...process.env,
      VMSNAP_CEPH_CONF: env.ceph.conf, VMSNAP_CEPH_ID: env.ceph.vmsnapId, VMSNAP_CEPH_KEYRING: env.ceph.vmsnapKeyring,
    };
    const total = (await run('rbd', ['-c', env.ceph.conf, '--id', env.ceph.adminId, '--keyring', env.ceph.adminKeyring, 'ls', pool])).stdout.trim().split('\n').length;
    const list: number[] = [];
    const base: number[] = [];
    let sets = 0;
    for (let r = 0; r < runs; r++) {
      let t0 = performance.now();
      const out = await run(process.execPath, [path.join(ROOT, 'bin/vmsnap.js'), 'list', domain, '--json'], { env: cliEnv, maxBuffer: 64 << 20 });
      list.push(performance.now() - t0);
      sets = (JSON.parse(out.stdout) as { sets: unknown[] }).sets.length;
      t0 = performance.now();
      await run('rbd', ['-c', env.ceph.conf, '--id', env.ceph.adminId, '--keyring', env.ceph.adminKeyring, 'ls', '--long', pool], { maxBuffer: 64 << 20 });
      base.push(performance.now() - t0);
    }
    if (sets !== count / 2) throw new Error(`vmsnap list found ${sets} sets, expected ${count / 2}`);
    const l = quantile(list, 0.5);
    const b = quantile(base, 0.5);
    const slowest = Math.max(...list);
    const pass = slowest < TARGET_MS;
    process.stdout.write(
      `vmsnap list: ${count} vmsnap images (${sets} sets) in a pool of ${total}; ${runs} runs\n` +
        `  vmsnap list --json   p50 ${l.toFixed(0)} ms  (max ${Math.max(...list).toFixed(0)})\n` +
        `  rbd ls --long        p50 ${b.toFixed(0)} ms  (baseline)\n` +
        `list-images vmsnap/rbd-ls-long p50 = ${(l / b).toFixed(2)}\n` +
        `${pass ? 'PASS' : 'FAIL'}: vmsnap list over ${count} images, slowest of ${runs} runs ${slowest.toFixed(0)} ms (target < ${TARGET_MS} ms)\n`,
    );
    if (!pass) process.exitCode = 1;
  } finally {
    for (const n of names) await removeImage(io, n).catch(() => undefined);
    await io.close();
    await rados.shutdown();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
