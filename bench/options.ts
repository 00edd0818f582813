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
  pauseMs: number;
  outDir: string;
}

export const USAGE = `npm run bench -- [--quick] [--runs N] [--guests 1disk,3disk] [--paxos 0.1,1.0]
    [--no-window] [--no-flatten] [--flatten-reps N] [--no-load] [--load-workflows N] [--pause-ms MS] [--out DIR]
  --quick: 5 runs per contender, the 1-disk guest, paxos 0.1, flatten 1 rep, no load test.`;

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
      'pause-ms': { type: 'string', default: '400' },
      out: { type: 'string', default: 'bench/results' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const quick = values.quick;
  const list = (s: string | undefined, d: string): string[] => (s ?? d).split(',').map((x) => x.trim()).filter(Boolean);
  const guests = list(values.guests, quick ? '1disk' : '1disk,3disk') as BenchOptions['guests'];
  for (const g of guests) if (g !== '1disk' && g !== '3disk') throw new Error(`--guests: ${g} is not 1disk or 3disk`);
  const paxos = list(values.paxos, quick ? '0.1' : '0.1,1.0').map(Number);
  if (paxos.some((p) => !Number.isFinite(p) || p <= 0)) throw new Error('--paxos: positive seconds, comma-separated');
  const runs = Number(values.runs ?? (quick ? 5 : 20));
  if (!Number.isInteger(runs) || runs < 1) throw new Error('--runs must be a positive integer');
  return {
    quick,
    window: !values['no-window'],
    runs,
    guests,
    paxos,
    flatten: !values['no-flatten'],
    flattenReps: Number(values['flatten-reps'] ?? (quick ? 1 : 3)),
    load: !quick && !values['no-load'],
    loadWorkflows: Number(values['load-workflows']),
    pauseMs: Number(values['pause-ms']),
    outDir: values.out,
  };
}
