import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { HISTORY_DIR, historyFiles } from '../helpers/histories';

/*
 * The patch ledger (docs/versioning.md) against the code and the kept replay histories.
 * - Every patched()/deprecatePatch() call in workflows/ has a ledger row, and the row's state
 *   matches the call: live means patched, deprecated means deprecatePatch, removed means no call.
 * - No live or deprecated row is left without a call.
 * - The fixture sets on disk are the sets the support window keeps.
 * - Nothing is deprecated or removed while a kept set still needs the old branch or the call.
 *
 * Ids are read where they are written: a string literal at the call, or a `const NAME = '...'`
 * (in the same file, in the file it is imported from, else the one such const in workflows/ or
 * src/model/). They are not moved into one module because each const sits next to the call and
 * the comment that says what it guards, and the ledger is the one list. This test keeps the two
 * in step. An argument it cannot resolve fails here.
 */

const ROOT = path.resolve(__dirname, '../..');
const LEDGER = path.join(ROOT, 'docs/versioning.md');
const PATCH_FNS = ['patched', 'deprecatePatch'] as const;
type Kind = (typeof PATCH_FNS)[number];
type State = 'live' | 'deprecated' | 'removed';
const KIND_OF: Record<State, Kind | undefined> = { live: 'patched', deprecated: 'deprecatePatch', removed: undefined };

interface Call {
  id: string;
  kind: Kind;
  /** `workflows/<file>.ts:<line>` */
  at: string;
}

function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((e) => {
    const p = path.join(dir, e);
    if (statSync(p).isDirectory()) return tsFiles(p);
    return p.endsWith('.ts') && !p.endsWith('.d.ts') ? [p] : [];
  });
}

const rel = (file: string) => path.relative(ROOT, file).split(path.sep).join('/');

function parse(file: string): ts.SourceFile {
  return ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
}

function stringOf(e: ts.Expression | undefined): string | undefined {
  while (e && (ts.isAsExpression(e) || ts.isParenthesizedExpression(e) || ts.isSatisfiesExpression(e))) e = e.expression;
  return e && (ts.isStringLiteral(e) || ts.isNoSubstitutionTemplateLiteral(e)) ? e.text : undefined;
}

/** `const NAME = '...'` anywhere in a file: name → every value it is bound to. */
function stringConsts(sf: ts.SourceFile): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  const visit = (n: ts.Node): void => {
    if (ts.isVariableDeclarationList(n) && n.flags & ts.NodeFlags.Const) {
      for (const d of n.declarations) {
        const v = stringOf(d.initializer);
        if (ts.isIdentifier(d.name) && v !== undefined) out.set(d.name.text, (out.get(d.name.text) ?? new Set()).add(v));
      }
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return out;
}

function moduleFile(from: string, spec: string): string | undefined {
  if (!spec.startsWith('.')) return undefined;
  const base = path.resolve(path.dirname(from), spec);
  return [`${base}.ts`, path.join(base, 'index.ts')].find((f) => {
    try {
      return statSync(f).isFile();
    } catch {
      return false;
    }
  });
}

/** Every patch call in workflows/**, and whatever could not be read as one. */
function patchCalls(): { calls: Call[]; problems: string[] } {
  const workflowFiles = tsFiles(path.join(ROOT, 'workflows'));
  const constFiles = [...workflowFiles, ...tsFiles(path.join(ROOT, 'src/model'))];
  const consts = new Map(constFiles.map((f) => [f, stringConsts(parse(f))]));
  const anywhere = new Map<string, Set<string>>();
  for (const m of consts.values()) for (const [name, vs] of m) for (const v of vs) anywhere.set(name, (anywhere.get(name) ?? new Set()).add(v));
  const calls: Call[] = [];
  const problems: string[] = [];

  for (const file of workflowFiles) {
    const sf = parse(file);
    const where = (n: ts.Node) => `${rel(file)}:${sf.getLineAndCharacterOfPosition(n.getStart(sf)).line + 1}`;
    // Local names of patched/deprecatePatch, of a namespace import of the SDK, and of imported consts.
    const fnNames = new Map<string, Kind>();
    const sdkNamespaces = new Set<string>();
    const imported = new Map<string, { name: string; from: string | undefined }>();
    for (const st of sf.statements) {
      if (!ts.isImportDeclaration(st) || !ts.isStringLiteral(st.moduleSpecifier) || !st.importClause?.namedBindings) continue;
      const spec = st.moduleSpecifier.text;
      const b = st.importClause.namedBindings;
      if (ts.isNamespaceImport(b)) {
        if (spec === '@temporalio/workflow') sdkNamespaces.add(b.name.text);
        continue;
      }
      for (const el of b.elements) {
        const name = (el.propertyName ?? el.name).text;
        if (spec === '@temporalio/workflow' && (PATCH_FNS as readonly string[]).includes(name)) fnNames.set(el.name.text, name as Kind);
        else imported.set(el.name.text, { name, from: moduleFile(file, spec) });
      }
    }
    const resolve = (arg: ts.Expression | undefined): string | undefined => {
      const literal = stringOf(arg);
      if (literal !== undefined || !arg || !ts.isIdentifier(arg)) return literal;
      const only = (vs: Set<string> | undefined) => (vs?.size === 1 ? [...vs][0] : undefined);
      const local = consts.get(file)!.get(arg.text);
      if (local) return only(local);
      const imp = imported.get(arg.text);
      if (imp) return imp.from ? only(consts.get(imp.from)?.get(imp.name)) : undefined;
      return only(anywhere.get(arg.text));
    };
    const visit = (n: ts.Node): void => {
      if (ts.isCallExpression(n)) {
        const callee = n.expression;
        const kind = ts.isIdentifier(callee)
          ? fnNames.get(callee.text)
          : ts.isPropertyAccessExpression(callee) && ts.isIdentifier(callee.expression) && sdkNamespaces.has(callee.expression.text)
            ? (PATCH_FNS as readonly string[]).includes(callee.name.text)
              ? (callee.name.text as Kind)
              : undefined
            : undefined;
        if (kind) {
          const id = resolve(n.arguments[0]);
          if (id === undefined) problems.push(`${where(n)}: ${kind}(${n.arguments[0]?.getText(sf) ?? ''}) — not a string literal or a const bound to one string`);
          else calls.push({ id, kind, at: where(n) });
          n.arguments.forEach(visit);
          return;
        }
      }
      // patched/deprecatePatch used other than by a call (passed on, wrapped): its ids would go unseen.
      if (ts.isIdentifier(n) && fnNames.has(n.text) && !ts.isImportSpecifier(n.parent)) problems.push(`${where(n)}: ${n.text} used other than as a direct call`);
      ts.forEachChild(n, visit);
    };
    visit(sf);
  }
  return { calls, problems };
}

/** A markdown table of the ledger page whose header row starts with `first`: one record per row. */
function table(md: string, first: string): Record<string, string>[] {
  const lines = md.split('\n');
  const start = lines.findIndex((l) => new RegExp(`^\\|\\s*${first}\\s*\\|`).test(l));
  if (start < 0) return [];
  const cells = (l: string) => l.trim().replace(/^\|/, '').replace(/\|$/, '').split('|').map((c) => c.trim());
  const header = cells(lines[start]!);
  const rows: Record<string, string>[] = [];
  for (const l of lines.slice(start + 2)) {
    if (!l.trim().startsWith('|')) break;
    const c = cells(l);
    rows.push(Object.fromEntries(header.map((h, i) => [h, c[i] ?? ''])));
  }
  return rows;
}

interface Row {
  id: string;
  calls: string[];
  firstSet: string | undefined;
  state: string;
}

function ledger(): { rows: Row[]; sets: { set: string; kept: boolean }[] } {
  const md = readFileSync(LEDGER, 'utf8');
  const rows = table(md, 'Patch id').map((r) => ({
    id: (r['Patch id'] ?? '').replace(/`/g, '').trim(),
    calls: [...(r['Calls'] ?? '').matchAll(/[\w-]+\.ts/g)].map((m) => m[0]).sort(),
    firstSet: /^\d{4}-\d{2}-\d{2}\w*$/.test(r['First set'] ?? '') ? r['First set'] : undefined,
    state: (r['State'] ?? '').toLowerCase().split(/\s/)[0] ?? '',
  }));
  const sets = table(md, 'Set').map((r) => ({ set: r['Set'] ?? '', kept: /^kept\b/i.test(r['Window'] ?? '') }));
  return { rows, sets };
}

/** Patch markers per kept set: id → whether any history of the set has it non-deprecated. */
function markers(): Map<string, Map<string, { deprecatedOnly: boolean; files: string[] }>> {
  const out = new Map<string, Map<string, { deprecatedOnly: boolean; files: string[] }>>();
  for (const f of historyFiles()) {
    const set = f.id.split('/')[0]!;
    const bySet = out.get(set) ?? new Map<string, { deprecatedOnly: boolean; files: string[] }>();
    out.set(set, bySet);
    const events = (JSON.parse(readFileSync(f.file, 'utf8')) as { events: { markerRecordedEventAttributes?: { markerName?: string; details?: Record<string, { payloads?: { data?: string }[] }> } }[] }).events;
    for (const e of events) {
      const m = e.markerRecordedEventAttributes;
      const data = m?.markerName === 'core_patch' ? m.details?.['patch-data']?.payloads?.[0]?.data : undefined;
      if (!data) continue;
      const { id, deprecated } = JSON.parse(Buffer.from(data, 'base64').toString('utf8')) as { id: string; deprecated: boolean };
      const seen = bySet.get(id) ?? { deprecatedOnly: true, files: [] };
      bySet.set(id, { deprecatedOnly: seen.deprecatedOnly && deprecated, files: [...new Set([...seen.files, f.id])] });
    }
  }
  return out;
}

describe('the patch ledger (docs/versioning.md)', () => {
  const { calls, problems } = patchCalls();
  const { rows, sets } = ledger();
  const byId = new Map(rows.map((r) => [r.id, r]));
  const callsOf = (id: string) => calls.filter((c) => c.id === id);
  const codeIds = [...new Set(calls.map((c) => c.id))].sort();

  it('finds the calls, the ledger and the releases (a parser that found nothing would pass the rest)', () => {
    expect(calls.length).toBeGreaterThan(10);
    expect(rows.length).toBeGreaterThan(10);
    expect(sets.filter((s) => s.kept).length).toBeGreaterThan(0);
  });

  it('reads every patch id: a string literal, or a const bound to one', () => {
    expect(problems, 'patch calls whose id cannot be read').toEqual([]);
  });

  it('has one row per id, each with a known state', () => {
    const dup = rows.map((r) => r.id).filter((id, i, all) => all.indexOf(id) !== i);
    const bad = rows.filter((r) => !(r.state in KIND_OF)).map((r) => `${r.id}: state '${r.state}' (live, deprecated or removed)`);
    expect([...dup.map((id) => `${id}: listed twice`), ...bad]).toEqual([]);
  });

  it('lists every id the code uses, in the state its calls say', () => {
    const wrong: string[] = [];
    for (const id of codeIds) {
      const row = byId.get(id);
      for (const c of callsOf(id)) {
        if (!row) wrong.push(`${id}: ${c.kind}() at ${c.at}, but the ledger in docs/versioning.md has no row for it`);
        else if (KIND_OF[row.state as State] !== c.kind) wrong.push(`${id}: ${c.kind}() at ${c.at}, but the ledger says ${row.state}${row.state === 'removed' ? ' (a removed id is never used again)' : ` (${KIND_OF[row.state as State]}())`}`);
      }
    }
    expect(wrong, 'patch calls the ledger does not account for').toEqual([]);
  });

  it('lists no live or deprecated id that no code calls', () => {
    const stale = rows.filter((r) => (r.state === 'live' || r.state === 'deprecated') && !callsOf(r.id).length).map((r) => `${r.id}: ${r.state} in the ledger, but no workflow calls it`);
    expect(stale).toEqual([]);
  });

  it('names the files that call each id', () => {
    const wrong = rows
      .filter((r) => r.state !== 'removed')
      .map((r) => ({ r, files: [...new Set(callsOf(r.id).map((c) => path.basename(c.at.replace(/:\d+$/, ''))))].sort() }))
      .filter(({ r, files }) => r.calls.join() !== files.join())
      .map(({ r, files }) => `${r.id}: the ledger says ${r.calls.join(', ') || 'nothing'}, the code calls it in ${files.join(', ')}`);
    expect(wrong).toEqual([]);
  });

  it('keeps on disk exactly the fixture sets the support window keeps', () => {
    const onDisk = readdirSync(HISTORY_DIR, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name)
      .sort();
    expect(onDisk).toEqual(sets.filter((s) => s.kept).map((s) => s.set).sort());
  });

  it('retires nothing a kept set still needs', () => {
    const order = sets.map((s) => s.set);
    const kept = sets.filter((s) => s.kept).map((s) => s.set);
    const oldestKept = Math.min(...kept.map((s) => order.indexOf(s)));
    const found = markers();
    const wrong: string[] = [];
    for (const r of rows) {
      const first = r.firstSet ? order.indexOf(r.firstSet) : -1;
      if (r.firstSet && first < 0) wrong.push(`${r.id}: first set ${r.firstSet} is not in the releases table`);
      // A kept set older than the id's first set that has its marker: the ledger's first set is wrong.
      for (const s of kept) {
        const m = found.get(s)?.get(r.id);
        if (m && (!r.firstSet || order.indexOf(s) < first)) wrong.push(`${r.id}: ${m.files.join(', ')} has its marker, but the ledger's first set is ${r.firstSet ?? '—'}`);
      }
      if (r.state === 'deprecated' || r.state === 'removed') {
        // deprecatePatch runs the new branch on a history without the marker: no kept set may predate the patch.
        if (!r.firstSet) wrong.push(`${r.id}: ${r.state}, but no released set was recorded with it`);
        else if (first > oldestKept) wrong.push(`${r.id}: ${r.state}, but the kept set ${order[oldestKept]} was recorded before it (first set ${r.firstSet})`);
      }
      if (r.state === 'removed') {
        // A non-deprecated marker with no call left is a non-determinism error.
        for (const s of kept) {
          const m = found.get(s)?.get(r.id);
          if (m && !m.deprecatedOnly) wrong.push(`${r.id}: removed, but ${m.files.join(', ')} has its marker without the deprecated flag`);
        }
      }
    }
    expect(wrong).toEqual([]);
  });
});
