import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { bashCompletion, zshCompletion } from '../../src/cli/completion';
import type { CommandSpec } from '../../src/cli/options';
import { COMMAND_SPECS } from '../../src/cli/specs';

/*
 * `vmsnap completion bash|zsh`, run in the real shells: each script is loaded and its completion
 * function called as the shell would, with the words typed so far. zsh's completion builtins
 * (compadd, _describe, _files) only work inside a completion widget, so they are replaced by
 * functions that print what they were given.
 */
const ROOT = path.resolve(__dirname, '../..');
const dir = mkdtempSync(path.join(os.tmpdir(), 'vmsnap-completion-'));
const leaves: CommandSpec[] = COMMAND_SPECS.flatMap((s) => (s.subcommands ? Object.values(s.subcommands) : [s]));
const flags = (s: CommandSpec) => Object.entries(s.options).flatMap(([n, o]) => [`--${n}`, ...(o.short ? [`-${o.short}`] : [])]);

/** For each line of words (the last one being typed), what bash completes. */
function bash(lines: string[][]): string[][] {
  const file = path.join(dir, 'vmsnap.bash');
  writeFileSync(file, bashCompletion(COMMAND_SPECS));
  const calls = lines.map((w) => `COMP_WORDS=(${w.map((x) => `'${x}'`).join(' ')}); COMP_CWORD=${w.length - 1}; _vmsnap; printf '%s\\n' "\${COMPREPLY[@]}" | sort; echo ===`);
  const out = execFileSync('bash', ['--norc', '--noprofile', '-c', `source '${file}'\n${calls.join('\n')}`], { encoding: 'utf8', cwd: dir });
  return out.split('===\n').slice(0, -1).map((b) => b.split('\n').filter(Boolean));
}

function zsh(lines: string[][]): string[][] {
  const file = path.join(dir, '_vmsnap');
  writeFileSync(file, zshCompletion(COMMAND_SPECS));
  const stubs = `compdef() { :; }
compadd() { [[ $1 == -- ]] && shift; print -l -- "$@"; }
_describe() { local -a a; a=("\${(@P)2}"); print -l -- "\${a[@]%%:*}"; }
_files() { print FILES; }`;
  const calls = lines.map((w) => `words=(${w.map((x) => `'${x}'`).join(' ')}); CURRENT=${w.length}; _vmsnap | sort; echo '==='`);
  const out = execFileSync('zsh', ['-f', '-c', `${stubs}\nsource '${file}'\n${calls.join('\n')}`], { encoding: 'utf8', cwd: dir });
  return out.split('===\n').slice(0, -1).map((b) => b.split('\n').filter(Boolean));
}

const cases: [string[], (got: string[]) => void][] = [
  [['vmsnap', 'sn'], (g) => expect(g).toEqual(['snapshot'])],
  [['vmsnap', 'pr'], (g) => expect(g).toEqual(['prune'])],
  [['vmsnap', 'schedule', 'up'], (g) => expect(g).toEqual(['update'])],
  [['vmsnap', 'completion', ''], (g) => expect(g).toEqual(['bash', 'zsh'])],
  [['vmsnap', 'snapshot', 'vm-42', '--qu'], (g) => expect(g).toEqual(['--quiesce'])],
  [['vmsnap', 'snapshot', 'vm-42', '--quiesce', ''], (g) => expect(g).toEqual(['prefer', 'require', 'skip'])],
  [['vmsnap', 'schedule', 'update', 's1', '--overlap', 'b'], (g) => expect(g).toEqual(['buffer-one'])],
  [['vmsnap', 'prune', 'vm-42', '--keep-'], (g) => expect(g).toEqual(['--keep-daily', '--keep-last', '--keep-monthly', '--keep-weekly'])],
  [['vmsnap', 'list', '--quiesced', ''], (g) => expect(g).toEqual(['false', 'true'])],
  [['vmsnap', 'snapshot', 'vm-42', '--pool', ''], (g) => expect(g).toEqual([])],
];

describe.each([
  ['bash', bash],
  ['zsh', zsh],
] as const)('%s completion', (shell, complete) => {
  it('completes commands, subcommands, flags and the values of flags with fixed values', () => {
    const got = complete(cases.map((c) => c[0]));
    cases.forEach(([words, check], i) => {
      try {
        check(shell === 'zsh' ? got[i]!.filter((x) => !x.startsWith('-') || words.at(-1)!.startsWith('-')).filter((x) => x.startsWith(words.at(-1)!)) : got[i]!);
      } catch (err) {
        throw new Error(`${words.join(' ')}: ${(err as Error).message}`, { cause: err });
      }
    });
  });

  it('offers exactly the flags of each command’s option table', () => {
    const got = complete(leaves.map((s) => ['vmsnap', ...s.name.split(' '), '-']));
    leaves.forEach((s, i) => {
      const expected = shell === 'zsh' ? flags(s).filter((f) => f.startsWith('--')) : flags(s);
      expect(got[i], s.name).toEqual(expected.sort());
    });
  });
});

describe('vmsnap completion', () => {
  it.each(['bash', 'zsh'])('%s prints the generated script', async (shell) => {
    const out = await new Promise<string>((resolve, reject) =>
      execFile(process.execPath, [path.join(ROOT, 'bin/vmsnap.js'), 'completion', shell], { timeout: 60_000 }, (err, stdout) => (err ? reject(err) : resolve(stdout))),
    );
    expect(out).toBe(shell === 'bash' ? bashCompletion(COMMAND_SPECS) : zshCompletion(COMMAND_SPECS));
    execFileSync(shell, ['-n', '-c', out]);
  }, 60_000);
});
