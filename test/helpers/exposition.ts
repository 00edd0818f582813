import { expect } from 'vitest';

/** One metric family of a /metrics text: its TYPE, HELP and samples. */
export interface Family {
  name: string;
  type: string;
  help: string;
  samples: { name: string; labels: string; value: string }[];
}

/** The text exposition format, parsed as strictly as Prometheus reads it. */
export function parseExposition(text: string): Family[] {
  const families = new Map<string, Family>();
  const help = new Map<string, string>();
  const declared: string[] = [];
  let current: Family | undefined;
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    let m = /^# HELP (\S+) (.*)$/.exec(line);
    if (m) {
      expect(help.has(m[1]!), `HELP of ${m[1]} given twice`).toBe(false);
      help.set(m[1]!, m[2]!);
      continue;
    }
    m = /^# TYPE (\S+) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (m) {
      expect(families.has(m[1]!), `family ${m[1]} declared twice`).toBe(false);
      current = { name: m[1]!, type: m[2]!, help: help.get(m[1]!) ?? '', samples: [] };
      families.set(current.name, current);
      declared.push(current.name);
      continue;
    }
    expect(line.startsWith('#'), `unknown comment: ${line}`).toBe(false);
    m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$/.exec(line);
    expect(m, `not a sample line: ${line}`).not.toBeNull();
    const [, name, labels = '', value] = m!;
    const family = current && [current.name, `${current.name}_bucket`, `${current.name}_sum`, `${current.name}_count`].includes(name!) ? current : undefined;
    expect(family, `sample ${name} outside its family`).toBeDefined();
    family!.samples.push({ name: name!, labels, value: value! });
  }
  return declared.map((n) => families.get(n)!);
}


/** The value of one sample (`name{labels}` exactly as exposed, or a bare name), NaN when absent. */
export function sample(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(series + ' '));
  return line ? Number(line.slice(series.length + 1)) : NaN;
}
