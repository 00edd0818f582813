import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/*
 * The README and docs/ are the repository's map: every file they link to, and every repository
 * path they name in backticks, must exist. A file moved or renamed without its docs fails here.
 */

const ROOT = path.resolve(__dirname, '../..');

/** A path named in backticks is a repository path when it starts with one of these. */
const TOP = ['src/', 'workflows/', 'activities/', 'test/', 'lab/', 'deploy/', 'bench/', 'scripts/', 'docs/', 'native/', 'support/', 'bin/', '.ci/'];

/** README.md, docs/*.md and bench/README.md, relative to the root. */
function mapFiles(): string[] {
  const docs = readdirSync(path.join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`);
  return ['README.md', ...docs.sort(), 'bench/README.md', 'src/safety/README.md'];
}

/** The markdown outside fenced code blocks (a fence's lines become empty, so line numbers hold). */
function prose(md: string): string {
  let fenced = false;
  return md
    .split('\n')
    .map((line) => {
      if (/^\s*(```|~~~)/.test(line)) {
        fenced = !fenced;
        return '';
      }
      return fenced ? '' : line;
    })
    .join('\n');
}

/** The code spans of the prose: `x`, ``x``. */
function codeSpans(text: string): string[] {
  return [...text.matchAll(/(`+)(?!`)([\s\S]*?[^`])\1(?!`)/g)].map((m) => m[2]!.trim());
}

/** Targets of inline links `[text](target)` that are files of this repository (no scheme, not a bare #anchor). */
function relativeLinks(md: string): string[] {
  const text = prose(md).replace(/(`+)(?!`)[\s\S]*?[^`]\1(?!`)/g, '');
  return [...text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)]
    .map((m) => m[1]!)
    .filter((t) => !/^[a-z][a-z0-9+.-]*:/i.test(t) && !t.startsWith('#'))
    .map((t) => decodeURI(t.replace(/#.*$/, '')));
}

/** Repository paths named in code spans: every word of a span that starts with a top-level folder. */
function namedPaths(md: string): string[] {
  return codeSpans(prose(md))
    .flatMap((span) => span.split(/\s+/))
    .map((w) => w.replace(/^[("'[]+/, '').replace(/[)"',;.\]]+$/, ''))
    .filter((w) => TOP.some((t) => w.startsWith(t)))
    .map((w) => w.replace(/#.*$/, '').replace(/:\d+(-\d+)?$/, ''))
    .filter((w) => !w.includes('<') && !w.includes('…') && !w.includes('...'));
}

/** `a.{json,png}` → `a.json`, `a.png`. */
function expandBraces(p: string): string[] {
  const m = /\{([^{}]*)\}/.exec(p);
  if (!m) return [p];
  return m[1]!.split(',').flatMap((alt) => expandBraces(p.slice(0, m.index) + alt + p.slice(m.index + m[0].length)));
}

/** Whether `p` (relative to the root) names something that exists; a `*` in the last part must match an entry of its directory. */
function exists(p: string): boolean {
  return expandBraces(p).every((one) => {
    if (!one.includes('*')) return existsSync(path.join(ROOT, one));
    const trimmed = one.replace(/\/$/, '');
    const dir = path.dirname(trimmed);
    if (dir.includes('*') || !existsSync(path.join(ROOT, dir)) || !statSync(path.join(ROOT, dir)).isDirectory()) return false;
    const glob = new RegExp(`^${path.basename(trimmed).replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*')}$`);
    return readdirSync(path.join(ROOT, dir)).some((e) => glob.test(e));
  });
}

describe('the docs name only what exists', () => {
  const files = mapFiles();

  it('finds the map: the README, docs/ and bench/README.md, each with links and paths to check', () => {
    expect(files).toEqual(expect.arrayContaining(['README.md', 'docs/README.md', 'docs/architecture.md', 'bench/README.md']));
    const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    // A parser that found nothing would pass every check below.
    expect(relativeLinks(readme).length).toBeGreaterThan(10);
    expect(namedPaths(readme).length).toBeGreaterThan(10);
  });

  it('reads links and paths as written: anchors, line numbers, globs, placeholders and code blocks', () => {
    const md = [
      'See [a](docs/safety.md#truth), [b](https://temporal.io), [c](#here) and `src/config.ts:12`.',
      'Run `npx tsx bench/guard-cost.ts --runs 3`; `test/unit/thaw-*.test.ts`; `lab/<script>.sh`; `vms/<uuid>_disk`.',
      '```sh',
      'cat test/nowhere.ts   # in a code block: not a claim about the tree',
      '```',
    ].join('\n');
    expect(relativeLinks(md)).toEqual(['docs/safety.md']);
    expect(namedPaths(md)).toEqual(['src/config.ts', 'bench/guard-cost.ts', 'test/unit/thaw-*.test.ts']);
    expect(exists('test/unit/thaw-*.test.ts')).toBe(true);
    expect(exists('test/unit/no-such-*.test.ts')).toBe(false);
    expect(exists('bench/results/bench-2026-11-30T08-07-18-071Z.{json,png}')).toBe(true);
    expect(exists('bench/results/bench-2026-11-30T08-07-18-071Z.{json,gif}')).toBe(false);
  });

  it.each(files)('%s: every relative link resolves to a file', (file) => {
    const md = readFileSync(path.join(ROOT, file), 'utf8');
    const missing = relativeLinks(md).filter((t) => !existsSync(path.resolve(ROOT, path.dirname(file), t)));
    expect(missing, `${file} links to files that do not exist`).toEqual([]);
  });

  it.each(files)('%s: every repository path it names in backticks exists', (file) => {
    const md = readFileSync(path.join(ROOT, file), 'utf8');
    const missing = [...new Set(namedPaths(md))].filter((p) => !exists(p));
    expect(missing, `${file} names paths that do not exist`).toEqual([]);
  });
});
