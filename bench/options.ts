/** Command-line options of `npm run bench`. */
import { parseArgs } from 'node:util';

export interface BenchOptions {
  quick: boolean;
  window: boolean;
  runs: number;
  guests: ('1disk' | '3disk')[];
  paxos: number[];
  flatten: boolean;
  flattenReps: number;
  load: boolean;
  loadWorkflows: number;
  /**
   * The load test twice in one run: its worker with node's defaults, then with the V8 flags the
   * worker ships with (src/worker/node-options.ts), to compare their memory and timings.
   */
  memoryAb: boolean;
  pauseMs: number;
  outDir: string;
  /** Private copies of the lab guests (support/lab/scratch-guest.ts) instead of the shared ones. */
  scratch: boolean;
  /** Their memory and data disk size (MiB); default the lab guests' 256 and 64. */
  scratchMemoryMiB: number;
  scratchDiskMiB: number;
  /** The write-load lane alone (write-load.ts): its dirty sizes (MiB per disk) and writer rate (MiB/s, 0 unpaced). */
  writeLoad?: { sizes: number[]; rateMiBps: number };
}

export const USAGE = `npm run bench -- [--quick] [--runs N] [--guests 1disk,3disk] [--paxos 0.1,1.0]
    [--no-window] [--no-flatten] [--flatten-reps N] [--no-load] [--load-workflows N] [--memory-ab] [--pause-ms MS] [--out DIR]
    [--write-load [--dirty 0,16,64,256] [--write-rate MiB/s]] [--scratch [--guest-memory MiB] [--disk-mib MiB]]
  --quick: 5 runs per contender, the 1-disk guest, paxos 0.1, flatten 1 rep, no load test.
  --memory-ab: the load test twice, its worker first with node's defaults, then with the V8 flags
    the worker ships with (NODE_OPTIONS of deploy/vmsnap-worker.service); prints both and their ratios.
  --write-load: only the write-load lane (the freeze window of a busy guest): before each run the
    guest's writers write --dirty MiB on each data disk (at most --write-rate MiB/s each; 0 = unpaced);
    floor, naive, vmsnap without and with its pre-flush, and the floor after sync / syncfs, interleaved.
    --runs (default 5) and --guests (default 1disk) apply.
  --scratch: the freeze-window and write-load runs go to private copies of the lab guests (same
    kernel, initramfs, agent, memory and disks; made for the run and removed after it) instead of
    vmsnap-g1/g3, which other engineers' runs freeze too (the load test too: one of each kind).
    --guest-memory and --disk-mib size them (default 256 and 64, the lab guests'): a 256 MiB guest
    keeps only ~16 MiB dirty, so 64 and 256 MiB of dirty data need a larger one.`;

export function parseOptions(argv: string[]): BenchOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      runs: { type: 'string' },
      guests: { type: 'string' },
      paxos: { type: 'string' },
      'no-window': { type: 'boolean', default: false },
      'no-flatten': { type: 'boolean', default: false },
      'flatten-reps': { type: 'string' },
      'no-load': { type: 'boolean', default: false },
      'load-workflows': { type: 'string', default: '50' },
      'memory-ab': { type: 'boolean', default: false },
      'pause-ms': { type: 'string', default: '400' },
      out: { type: 'string', default: 'bench/results' },
      'write-load': { type: 'boolean', default: false },
      scratch: { type: 'boolean', default: false },
      'guest-memory': { type: 'string', default: '256' },
      'disk-mib': { type: 'string', default: '64' },
      dirty: { type: 'string', default: '0,16,64,256' },
      'write-rate': { type: 'string', default: '0' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const writeLoad = values['write-load'];
  const quick = values.quick || writeLoad;
  const list = (s: string | undefined, d: string): string[] => (s ?? d).split(',').map((x) => x.trim()).filter(Boolean);
  const guests = list(values.guests, quick ? '1disk' : '1disk,3disk') as BenchOptions['guests'];
  for (const g of guests) if (g !== '1disk' && g !== '3disk') throw new Error(`--guests: ${g} is not 1disk or 3disk`);
  const paxos = list(values.paxos, quick ? '0.1' : '0.1,1.0').map(Number);
  if (paxos.some((p) => !Number.isFinite(p) || p <= 0)) throw new Error('--paxos: positive seconds, comma-separated');
  const runs = Number(values.runs ?? (quick ? 5 : 20));
  if (!Number.isInteger(runs) || runs < 1) throw new Error('--runs must be a positive integer');
  const sizes = list(values.dirty, '0').map(Number);
  if (sizes.some((n) => !Number.isInteger(n) || n < 0)) throw new Error('--dirty: whole MiB >= 0, comma-separated');
  const mib = (v: string, flag: string): number => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 64) throw new Error(`${flag}: whole MiB >= 64`);
    return n;
  };
  const rateMiBps = Number(values['write-rate']);
  if (!Number.isFinite(rateMiBps) || rateMiBps < 0) throw new Error('--write-rate: MiB/s >= 0');
  return {
    quick: values.quick,
    window: !values['no-window'] && !writeLoad,
    runs,
    guests,
    paxos,
    flatten: !values['no-flatten'] && !writeLoad,
    flattenReps: Number(values['flatten-reps'] ?? (quick ? 1 : 3)),
    load: !quick && !values['no-load'],
    loadWorkflows: Number(values['load-workflows']),
    memoryAb: values['memory-ab'],
    pauseMs: Number(values['pause-ms']),
    outDir: values.out,
    scratch: values.scratch || values['guest-memory'] !== '256' || values['disk-mib'] !== '64',
    scratchMemoryMiB: mib(values['guest-memory'], '--guest-memory'),
    scratchDiskMiB: mib(values['disk-mib'], '--disk-mib'),
    ...(writeLoad ? { writeLoad: { sizes: sizes.includes(0) ? sizes : [0, ...sizes], rateMiBps } } : {}),
  };
}
