/*
 * Snapshot-create latency: the binding (connection and image kept open) vs one
 * `rbd snap create` process per call, interleaved in the same run; plus the bounded path
 * (Snapshotter child, image warmed). Prints medians and the CLI/binding ratio.
 *
 *   npx tsx bench/snap-latency.ts [--runs N] [--pool vms] [--exclusive-lock]
 *
 * The image is created with `layering` only by default, so the three clients do not pass the
 * exclusive lock back and forth between calls; --exclusive-lock uses librbd's default features
 * (then each path first has to take the lock from the previous one).
 *
 * Uses the lab's Ceph (.lab/env*, or CEPH_CONF/CEPH_ID/CEPH_KEYRING). Snapshot latency is set
 * by the monitor's paxos_propose_interval (printed): compare figures only at the same setting.
 */
import { execFileSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import { RadosCluster, Snapshotter, createImage, openImage, removeImage } from '../src/ceph';
import { cephTestEnv, cliArgs, uniqueName } from '../support/ceph';

const { values } = parseArgs({ options: {
    runs: { type: 'string', default: '20' },
    pool: { type: 'string' },
    'exclusive-lock': { type: 'boolean', default: false },
  } });
const runs = Number(values.runs);

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

async function main(): Promise<void> {
  const env = cephTestEnv();
  if (!env) throw new Error('no Ceph settings: start the lab (bash lab/lab.sh up) or set CEPH_CONF');
  const pool = values.pool ?? env.vmPool;
  const cli = cliArgs(env);
  let paxos = 'unknown';
  try {
    paxos = execFileSync('ceph', [...cli, 'config', 'get', 'mon', 'paxos_propose_interval'], { encoding: 'utf8' }).trim();
  } catch {
    // not readable with these caps
  }

  const cluster = await RadosCluster.connect(env);
  const io = await cluster.openIoCtx(pool);
  const name = uniqueName('bench');
  const features = values['exclusive-lock'] ? undefined : 1n; // 1 = RBD_FEATURE_LAYERING
  await createImage(io, name, 64 << 20, { features });
  const image = await openImage(io, name);
  const snapshotter = new Snapshotter({ ...env, idleCloseMs: 60_000 });
  await snapshotter.start();
  const req = { pool, image: name, snap: '' };
  await snapshotter.prepare([req], { timeoutMs: 10_000 });

  const binding: number[] = [];
  const child: number[] = [];
  const process_: number[] = [];
  try {
    await image.createSnap('warmup'); // first snapshot of an image pays extra
    for (let i = 0; i < runs; i++) {
      let t0 = performance.now();
      await image.createSnap(`b${i}`);
      binding.push(performance.now() - t0);

      t0 = performance.now();
      execFileSync('rbd', [...cli, 'snap', 'create', `${pool}/${name}@c${i}`], { stdio: 'ignore' });
      process_.push(performance.now() - t0);

      t0 = performance.now();
      const r = await snapshotter.createSnaps([{ ...req, snap: `s${i}` }], { timeoutMs: 10_000 });
      child.push(performance.now() - t0);
      if (r.created.length !== 1) throw new Error(`snapshotter: ${JSON.stringify(r)}`);
    }
  } finally {
    await snapshotter.close();
    for (const s of await image.listSnaps()) await image.removeSnap(s.name);
    await image.close();
    await removeImage(io, name);
    await io.close();
    await cluster.shutdown();
  }

  const mb = median(binding);
  const mc = median(process_);
  const ms = median(child);
  console.log(
    `snap create latency, ${runs} runs interleaved, pool ${pool}, paxos_propose_interval=${paxos}, ` +
      `features ${values['exclusive-lock'] ? 'librbd default (exclusive-lock on)' : 'layering only'}`,
  );
  console.log(`  binding (connection + image open)     median ${mb.toFixed(1)} ms  (min ${Math.min(...binding).toFixed(1)}, max ${Math.max(...binding).toFixed(1)})`);
  console.log(`  rbd snap create (process per call)    median ${mc.toFixed(1)} ms  (min ${Math.min(...process_).toFixed(1)}, max ${Math.max(...process_).toFixed(1)})`);
  console.log(`  Snapshotter child (bounded, warmed)   median ${ms.toFixed(1)} ms  (min ${Math.min(...child).toFixed(1)}, max ${Math.max(...child).toFixed(1)})`);
  console.log(`  ratio CLI / binding = ${(mc / mb).toFixed(2)}x; CLI - binding = ${(mc - mb).toFixed(1)} ms`);
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
