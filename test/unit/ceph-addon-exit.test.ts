import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repetitions } from '../helpers/lanes';

/*
 * A CLI command ends while addon calls still run on addon threads (handles closing behind it).
 * Exiting then is unsafe twice over: a finishing call touched the thread-safe function Node had
 * freed (11 of 60 `vmsnap doctor` runs under CPU load died with SIGABRT), and a call still inside
 * librados loses Ceph's static state to exit's destructors. The addon's guard covers the first;
 * the CLI drains the addon (addonDrained) before it exits, which this test does the same way.
 * Without the drain, 16 of 30 such runs died (SIGABRT or SIGSEGV): 10 runs in the default lane
 * (all 10 pass by chance with odds below 1 in 1,000), 30 in the extended one, 3 in the ASan lane
 * (VMSNAP_ADDON_EXIT_RUNS; scripts/test-asan.sh).
 */
const SCRIPT = `
const { native } = require(process.argv[1]);
const { addonDrained } = require(process.argv[2]);
for (let i = 0; i < 400; i++) native().connect('/nonexistent/ceph.conf', 'admin', null, 1).catch(() => {});
void addonDrained(10000).then((idle) => process.exit(idle ? 0 : 3));
`;

describe('native addon at process exit', () => {
  it('exits cleanly with calls in flight, every time', () => {
    const nativeModule = path.resolve(__dirname, '../../src/ceph/native.ts');
    const runtimeModule = path.resolve(__dirname, '../../src/ceph/addon-runtime.ts');
    const outcomes: string[] = [];
    for (let i = 0; i < repetitions(process.env.VMSNAP_ADDON_EXIT_RUNS, 10, 30); i++) {
      const r = spawnSync(process.execPath, ['--require', require.resolve('tsx/cjs'), '-e', SCRIPT, nativeModule, runtimeModule], { encoding: 'utf8', timeout: 30_000 });
      outcomes.push(r.signal ? `signal ${r.signal}` : `exit ${r.status}`);
    }
    expect(outcomes.filter((o) => o !== 'exit 0'), outcomes.join(', ')).toEqual([]);
    // Under the ASan lane every child runs instrumented (about 5 s each at load 20 on 2 cores).
  }, 120_000 * Number(process.env.VMSNAP_ASAN_SLOWDOWN ?? '1'));
});
