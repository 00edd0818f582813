import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { addonPath } from '../../src/ceph/native';

/*
 * A CLI command ends while addon calls still run on addon threads (handles closing behind it).
 * Exiting then is unsafe twice over: a finishing call touched the thread-safe function Node had
 * freed (11 of 60 `vmsnap doctor` runs under CPU load died with SIGABRT), and a call still inside
 * librados loses Ceph's static state to exit's destructors. The addon's guard covers the first;
 * the CLI drains the addon (addonDrained) before it exits, which this test does the same way.
 * Without the drain, 16 of 30 such runs died (SIGABRT or SIGSEGV).
 */
const SCRIPT = `
const { native } = require(process.argv[1]);
const { addonDrained } = require(process.argv[2]);
for (let i = 0; i < 400; i++) native().connect('/nonexistent/ceph.conf', 'admin', null, 1).catch(() => {});
void addonDrained(10000).then((idle) => process.exit(idle ? 0 : 3));
`;

/**
 * The two modules as plain JavaScript in a temp dir, as the CLI runs them from dist/: a child
 * started through tsx spends ~0.7 s of its ~1.1 s compiling, 30 times over.
 */
function transpiled(): { nativeModule: string; runtimeModule: string } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-addon-exit-'));
  for (const name of ['native', 'addon-runtime']) {
    const source = readFileSync(path.resolve(__dirname, `../../src/ceph/${name}.ts`), 'utf8');
    const { outputText } = ts.transpileModule(source, { compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true } });
    writeFileSync(path.join(dir, `${name}.js`), outputText);
  }
  return { nativeModule: path.join(dir, 'native.js'), runtimeModule: path.join(dir, 'addon-runtime.js') };
}

describe('native addon at process exit', () => {
  it('exits cleanly with calls in flight, every time', () => {
    const { nativeModule, runtimeModule } = transpiled();
    // Found from src/ by walking up; the temp copy is told where it is.
    const env = { ...process.env, VMSNAP_RBD_ADDON: addonPath() };
    const outcomes: string[] = [];
    for (let i = 0; i < 30; i++) {
      const r = spawnSync(process.execPath, ['-e', SCRIPT, nativeModule, runtimeModule], { encoding: 'utf8', timeout: 30_000, env });
      outcomes.push(r.signal ? `signal ${r.signal}` : `exit ${r.status}`);
    }
    expect(outcomes.filter((o) => o !== 'exit 0'), outcomes.join(', ')).toEqual([]);
    // Under the ASan lane every child runs instrumented (about 5 s each at load 20 on 2 cores).
  }, 120_000 * Number(process.env.VMSNAP_ASAN_SLOWDOWN ?? '1'));
});
