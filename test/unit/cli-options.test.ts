import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { EXIT_CODES, CliError } from '../../src/cli/exit-codes';
import { helpText, parseCommand } from '../../src/cli/options';
import type { CommandSpec, Option } from '../../src/cli/options';
import { COMMAND_SPECS } from '../../src/cli/specs';
import { SNAPSHOT } from '../../src/cli/specs/snapshot';
import { DOCTOR } from '../../src/cli/specs/doctor';

/*
 * One option table per command drives parsing and help (and completion: cli-completion.test.ts).
 * Here: each command's help shows exactly its table's flags, parsing takes exactly those, and
 * the exit code table in docs/operations.md is exit-codes.ts's.
 */

const ROOT = path.resolve(__dirname, '../..');
const leaves: CommandSpec[] = COMMAND_SPECS.flatMap((s) => (s.subcommands ? Object.values(s.subcommands) : [s]));
const allFlags = new Set(leaves.flatMap((s) => Object.keys(s.options)));

/** The flags a help text's option rows name. */
function helpFlags(text: string): string[] {
  const rows = text.slice(text.indexOf('\nOptions:\n'));
  return [...rows.matchAll(/^ {2}(?:-[a-z], )?--([a-z][a-z0-9-]*)/gm)].map((m) => m[1]!);
}

/** A value the flag accepts. */
function sample(o: Option): string {
  if (o.choices) return o.choices[0]!;
  if (o.duration) return '60s';
  return '1';
}

function quietly<T>(fn: () => T): T {
  const write = process.stdout.write;
  process.stdout.write = (() => true) as typeof process.stdout.write;
  try {
    return fn();
  } finally {
    process.stdout.write = write;
  }
}

describe('help and parsing from one table per command', () => {
  it.each(leaves.map((s) => [s.name, s] as const))('%s: help lists exactly its flags, no common block', (_name, spec) => {
    const text = helpText(spec);
    expect(text).toMatch(new RegExp(`^Usage: vmsnap ${spec.name} `));
    expect(text).not.toMatch(/Common options/);
    expect(helpFlags(text).sort()).toEqual(Object.keys(spec.options).sort());
  });

  it.each(leaves.map((s) => [s.name, s] as const))('%s: takes each of its flags and refuses every other command’s', (_name, spec) => {
    for (const [name, o] of Object.entries(spec.options)) {
      if (name === 'help') continue;
      const argv = o.type === 'boolean' ? [`--${name}`] : [`--${name}`, sample(o)];
      expect(() => parseCommand(spec, argv), `--${name}`).not.toThrow();
    }
    for (const other of allFlags) {
      if (other in spec.options) continue;
      let err: unknown;
      try {
        parseCommand(spec, [`--${other}`, 'x']);
      } catch (e) {
        err = e;
      }
      expect(err, `${spec.name} --${other}`).toBeInstanceOf(CliError);
      expect((err as CliError).type).toBe('UnknownOption');
      expect((err as CliError).exitCode).toBe(2);
    }
  });

  it('--help prints the help and parses nothing else', () => {
    expect(quietly(() => parseCommand(SNAPSHOT, ['--help', '--bogus']))).toBeUndefined();
  });

  it('status and cancel show no libvirt, Ceph, host or state flags (they use none)', () => {
    const status = helpText(leaves.find((s) => s.name === 'status')!);
    for (const f of ['--libvirt-uri', '--ceph-conf', '--host', '--state-dir', '--disk']) expect(status).not.toContain(f);
  });
});

describe('duration flags: the new spelling and the old one, one parser', () => {
  const ms = (argv: string[]) => parseCommand(SNAPSHOT, argv)!.ms;

  it('reads 10s and the old --freeze-deadline-ms 10000 alike', () => {
    expect(ms(['--freeze-deadline', '10s'])['freeze-deadline']).toBe(10_000);
    expect(ms(['--freeze-deadline-ms', '10000'])['freeze-deadline']).toBe(10_000);
    expect(ms(['--freeze-deadline', '1h30m'])['freeze-deadline']).toBe(5_400_000);
    expect(ms(['--agent-timeout-s', '5'])['agent-timeout']).toBe(5000);
    expect(ms(['--agent-timeout', '5s'])['agent-timeout']).toBe(5000);
    expect(ms(['--snapshot-timeout', '500ms'])['snapshot-timeout']).toBe(500);
  });

  it.each([
    [['--freeze-deadline', '10000'], /--freeze-deadline expects a duration/],
    [['--freeze-deadline', '10s', '--freeze-deadline-ms', '10000'], /give --freeze-deadline or --freeze-deadline-ms, not both/],
    [['--agent-timeout', '1500ms'], /--agent-timeout must be whole 1s steps/],
    [['--freeze-deadline-ms', '-1'], /freeze-deadline-ms/],
  ])('%j → exit 2', (argv, message) => {
    let err: unknown;
    try {
      parseCommand(SNAPSHOT, argv);
    } catch (e) {
      err = e;
    }
    expect((err as CliError).exitCode).toBe(2);
    expect((err as CliError).message).toMatch(message);
  });

  it('keeps a flag to its bounds (doctor: 1s to 99s, whole seconds)', () => {
    expect(parseCommand(DOCTOR, ['--agent-timeout-s', '99'])!.ms['agent-timeout']).toBe(99_000);
    expect(() => parseCommand(DOCTOR, ['--agent-timeout', '100s'])).toThrow(/at most 1m39s/);
    expect(() => parseCommand(DOCTOR, ['--agent-timeout-s', '0'])).toThrow(/at least 1s/);
  });
});

describe('exit codes: one table', () => {
  it('docs/operations.md lists every code with exit-codes.ts’s own words', () => {
    const doc = readFileSync(path.join(ROOT, 'docs/operations.md'), 'utf8');
    const rows = [...doc.matchAll(/^\| (\d) \| `(\w+)` \| (.+) \|$/gm)].map((m) => ({ code: Number(m[1]), type: m[2], meaning: m[3] }));
    expect(rows).toEqual(EXIT_CODES.map((e) => ({ code: e.code, type: e.type, meaning: e.meaning })));
  });
});

/** The real CLI, offline: a refusal before anything is contacted. */
function cli(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [path.join(ROOT, 'bin/vmsnap.js'), ...argv], { env: { PATH: process.env.PATH, VMSNAP_TEMPORAL_ADDRESS: '127.0.0.1:1' }, timeout: 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

describe('--json errors: one JSON document on stdout', () => {
  it.each([
    [['status', 'x', '--bogus', '--json'], 'UnknownOption'],
    [['nosuchcommand', '--json'], 'UnknownCommand'],
    [['prune', 'vm-42', '--json'], 'BadInput'],
    [['snapshot', 'vm-42', '--freeze-deadline', '10', '--json'], 'BadInput'],
  ])('%j', async (argv, type) => {
    const r = await cli(argv);
    expect(r.code, r.stderr).toBe(2);
    const doc = JSON.parse(r.stdout) as { error: { type: string; message: string; exitCode: number } };
    expect(doc).toEqual({ error: { type, message: expect.any(String), exitCode: 2 } });
    expect(r.stderr).toContain(doc.error.message);
  }, 60_000);
});
