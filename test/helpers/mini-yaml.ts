/**
 * Reads the YAML subset that deploy/prometheus/ is written in (block mappings and sequences, plain
 * and quoted scalars, `|` and `>-` block scalars, `[]`, whole-line comments), for tests that check
 * what the rules and fixtures say. No YAML library is a dependency of vmsnap; anything outside the
 * subset throws, so a file written otherwise fails loudly instead of being half read. promtool is
 * the judge of the files' validity; this only reads them.
 */
export type Yaml = string | Yaml[] | { [key: string]: Yaml };

interface Line {
  indent: number;
  text: string;
  no: number;
}

export function parseYaml(source: string): Yaml {
  const lines: Line[] = [];
  source.split('\n').forEach((raw, i) => {
    if (/^\s*(#.*)?$/.test(raw)) return;
    if (raw.includes('\t')) throw new Error(`line ${i + 1}: tab`);
    lines.push({ indent: raw.length - raw.trimStart().length, text: raw.trim(), no: i + 1 });
  });
  const at = { i: 0 };
  const value = block(lines, at, lines[0]?.indent ?? 0, source.split('\n'));
  if (at.i < lines.length) throw new Error(`line ${lines[at.i]!.no}: unexpected indentation`);
  return value;
}

function block(lines: Line[], at: { i: number }, indent: number, raw: string[]): Yaml {
  const first = lines[at.i];
  if (!first || first.indent !== indent) throw new Error(`line ${first?.no ?? 'EOF'}: expected a block at indent ${indent}`);
  if (first.text.startsWith('- ') || first.text === '-') {
    const seq: Yaml[] = [];
    while (at.i < lines.length && lines[at.i]!.indent === indent && lines[at.i]!.text.startsWith('-')) {
      const line = lines[at.i]!;
      const rest = line.text.slice(1).trimStart();
      const inner = indent + (line.text.length - rest.length);
      if (rest.includes(': ') || rest.endsWith(':')) {
        // "- key: value" opens a mapping whose keys sit where `key` does.
        lines[at.i] = { indent: inner, text: rest, no: line.no };
        seq.push(block(lines, at, inner, raw));
      } else {
        at.i++;
        seq.push(scalar(rest, line.no));
      }
    }
    return seq;
  }
  const map: { [key: string]: Yaml } = {};
  while (at.i < lines.length && lines[at.i]!.indent === indent) {
    const line = lines[at.i]!;
    const m = /^([A-Za-z0-9_.-]+):(?:\s+(.*))?$/.exec(line.text);
    if (!m) throw new Error(`line ${line.no}: not "key: value": ${line.text}`);
    const [, key, value] = m as unknown as [string, string, string | undefined];
    at.i++;
    if (value === undefined) {
      const next = lines[at.i];
      map[key] = next && next.indent > indent ? block(lines, at, next.indent, raw) : '';
    } else if (value === '|' || value === '>-' || value === '>') {
      const body: string[] = [];
      while (at.i < lines.length && lines[at.i]!.indent > indent) body.push(raw[lines[at.i++]!.no - 1]!);
      const cut = Math.min(...body.map((l) => l.length - l.trimStart().length));
      const text = body.map((l) => l.slice(cut).trimEnd());
      map[key] = value === '|' ? text.join('\n') + '\n' : text.join(' ') + (value === '>' ? '\n' : '');
    } else {
      map[key] = scalar(value, line.no);
    }
  }
  return map;
}

function scalar(text: string, no: number): Yaml {
  if (text === '[]') return [];
  if (text.startsWith('"')) return JSON.parse(text) as string;
  if (text.startsWith("'")) {
    if (!text.endsWith("'")) throw new Error(`line ${no}: unterminated quote`);
    return text.slice(1, -1).replace(/''/g, "'");
  }
  if (/^[[{|>&*!%@`]/.test(text) || / #/.test(text)) throw new Error(`line ${no}: outside the YAML subset: ${text}`);
  return text;
}

/** `value` as a mapping, or a failure naming `what`. */
export function asMap(value: Yaml | undefined, what: string): { [key: string]: Yaml } {
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw new Error(`${what} is not a mapping`);
  return value;
}

/** `value` as a sequence ([] when absent), or a failure naming `what`. */
export function asList(value: Yaml | undefined, what: string): Yaml[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw new Error(`${what} is not a sequence`);
  return value;
}
