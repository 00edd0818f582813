/**
 * Flatten throughput: vmsnap's binding (rbd_flatten_with_progress on an addon thread, with a
 * progress callback as flattenDisk uses it) vs `rbd flatten` (one process) on clones of the same
 * 1 GiB snapshot, interleaved with alternating order. Each clone is removed right after.
 */
import { cloneImage, openImage } from '../src/ceph';
import type { IoCtx } from '../src/ceph';
import { run } from '../support/lab/cli-tools';
import { BASE_SNAP } from './big-image';
import type { BigImage } from './big-image';
import { nowMs } from './clock';
import { removeImageRetrying } from './lab-context';
import type { LabContext } from './lab-context';
import { summarize } from './stats';
import type { Summary } from './stats';

export interface FlattenResult {
  bytes: number;
  reps: number;
  bindingMs: number[];
  cliMs: number[];
  binding: Summary;
  cli: Summary;
  bindingMiBps: number;
  cliMiBps: number;
  /** binding throughput / rbd flatten throughput (medians). */
  ratio: number;
}

export async function flattenThroughput(ctx: LabContext, big: BigImage, imagesIo: IoCtx, reps: number, log: (s: string) => void): Promise<FlattenResult> {
  const bytes = (await big.image.stat()).size;
  const bindingMs: number[] = [];
  const cliMs: number[] = [];
  const viaBinding = async (name: string): Promise<number> => {
    const img = await openImage(imagesIo, name);
    try {
      const t0 = nowMs();
      let progressCalls = 0;
      await img.flatten({ onProgress: () => void progressCalls++ }); // a callback, as flattenDisk passes one
      return nowMs() - t0;
    } finally {
      await img.close();
    }
  };
  const viaCli = async (name: string): Promise<number> => {
    const t0 = nowMs();
    await run('rbd', [...ctx.rbdArgs, 'flatten', '--no-progress', `${imagesIo.pool}/${name}`], 600_000);
    return nowMs() - t0;
  };
  for (let i = 0; i < reps; i++) {
    const order = i % 2 === 0 ? (['binding', 'cli'] as const) : (['cli', 'binding'] as const);
    for (const how of order) {
      const name = `bench-flat-${how}-${i}-${Date.now().toString(36)}`;
      await cloneImage(big.io, big.name, BASE_SNAP, imagesIo, name);
      try {
        const ms = how === 'binding' ? await viaBinding(name) : await viaCli(name);
        (how === 'binding' ? bindingMs : cliMs).push(ms);
        log(`  flatten ${how} rep ${i + 1}/${reps}: ${ms.toFixed(0)} ms`);
      } finally {
        await removeImageRetrying(imagesIo, name);
      }
    }
  }
  const binding = summarize(bindingMs);
  const cli = summarize(cliMs);
  const mib = bytes / (1 << 20);
  const bindingMiBps = mib / (binding.p50 / 1000);
  const cliMiBps = mib / (cli.p50 / 1000);
  return { bytes, reps, bindingMs, cliMs, binding, cli, bindingMiBps, cliMiBps, ratio: bindingMiBps / cliMiBps };
}
