import { promises as fs } from 'node:fs';
import path from 'node:path';
import { bootId, monoMs } from '../host/clock';
import { UUID_RE, jsonFields } from '../model/json-record';

/**
 * The host's record of the freezes vmsnap is responsible for: one fsync'ed file per domain in
 * `<stateDir>/frozen/`. An entry is written before the freeze call and removed only once a thaw
 * is proven (guest-fsfreeze-status `thawed`) or the domain is gone — never on a connection error.
 */
export interface JournalEntry {
  domainUuid: string;
  domainName: string;
  /** Who froze it: `<workflowId>/<runId>`. */
  owner: string;
  /**
   * `window`: armed around a freeze; its deadline is the freeze deadline.
   * `watch`: a freeze whose outcome was unknown may still land until the deadline; anything that
   * finds the guest frozen meanwhile thaws it.
   */
  mode: 'window' | 'watch';
  /** Wall clock, ms since epoch: for humans only. */
  frozenAt: number;
  deadlineAt: number;
  /** CLOCK_MONOTONIC ms of the deadline, valid under `bootId` only. */
  deadlineMono: number;
  bootId: string;
  agentTimeoutSec: number;
  /** Identifies the watchdog that serves this entry; a watchdog acts only while it is named here. */
  guardId: string;
  guardPid?: number;
  /** The freeze this entry guards (its cluster-wide obligation's id); absent in entries from before it. */
  freezeId?: string;
  /** The domain's agent response timeout before vmsnap set its own (restored after the thaw). */
  previousAgentTimeout?: number;
}

export type JournalLogger = (message: string, fields: Record<string, unknown>) => void;

export class FreezeJournal {
  readonly dir: string;
  constructor(stateDir: string, private readonly onQuarantine: JournalLogger = () => undefined) {
    this.dir = path.join(stateDir, 'frozen');
  }

  async write(entry: JournalEntry): Promise<void> {
    await fs.mkdir(this.dir, { recursive: true });
    await writeDurably(this.path(entry.domainUuid), JSON.stringify(entry));
  }

  /**
   * The entry for a domain. A file that is not a valid entry (a torn write, a hand edit) is moved
   * aside to `<uuid>.json.bad-<time>` and logged, so it can neither crash the worker nor hide
   * behind a retry loop.
   */
  async read(domainUuid: string): Promise<JournalEntry | undefined> {
    const file = this.path(domainUuid);
    const text = await fs.readFile(file, 'utf8').catch(() => undefined);
    if (text === undefined) return undefined;
    const entry = parseEntry(text);
    if (!entry) {
      const aside = `${file}.bad-${Date.now()}`;
      await fs.rename(file, aside).catch(() => undefined);
      this.onQuarantine('malformed freeze journal entry moved aside', { file: aside });
      return undefined;
    }
    return entry;
  }

  async entries(): Promise<JournalEntry[]> {
    const names = await fs.readdir(this.dir).catch(() => [] as string[]);
    const out: JournalEntry[] = [];
    for (const n of names.filter((x) => x.endsWith('.json'))) {
      const e = await this.read(n.slice(0, -'.json'.length));
      if (e) out.push(e);
    }
    return out;
  }

  /**
   * The entries as they are, for a reader that must change nothing (the /metrics scrape): a file
   * that is not a valid entry is skipped, and left for read() to move aside. A journal dir that
   * does not exist yet is empty; any other failure to list it throws.
   */
  async peek(): Promise<JournalEntry[]> {
    let names: string[];
    try {
      names = await fs.readdir(this.dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
    const texts = await Promise.all(names.filter((n) => n.endsWith('.json')).map((n) => fs.readFile(path.join(this.dir, n), 'utf8').catch(() => undefined)));
    return texts.flatMap((t) => (t === undefined ? [] : (parseEntry(t) ?? [])));
  }

  async remove(domainUuid: string): Promise<void> {
    await fs.rm(this.path(domainUuid), { force: true });
  }

  path(domainUuid: string): string {
    return path.join(this.dir, `${domainUuid}.json`);
  }
}

/** Where a watchdog records that it fired (ms since epoch), read back by FreezeGuard.release(). */
export function firedMarkerPath(stateDir: string, uuid: string): string {
  return path.join(stateDir, 'frozen', `${uuid}.fired`);
}

/** Past its deadline (plus grace) on the monotonic clock; an entry from another boot always is. */
export function isOverdue(entry: JournalEntry, graceMs = 0, now = monoMs()): boolean {
  if (entry.bootId !== bootId()) return true;
  return now >= entry.deadlineMono + graceMs;
}

export function parseEntry(text: string): JournalEntry | undefined {
  const f = jsonFields(text);
  if (!f) return undefined;
  const { o: e, str, num } = f;
  if (!str('domainUuid') || !UUID_RE.test(e.domainUuid as string) || !str('domainName') || !str('owner')) return undefined;
  if (!num('frozenAt') || !num('deadlineAt')) return undefined;
  // Entries written before the monotonic fields existed: treat as overdue, which is what they are.
  return {
    domainUuid: e.domainUuid as string,
    domainName: e.domainName as string,
    owner: e.owner as string,
    mode: e.mode === 'watch' ? 'watch' : 'window',
    frozenAt: e.frozenAt as number,
    deadlineAt: e.deadlineAt as number,
    deadlineMono: num('deadlineMono') ? (e.deadlineMono as number) : 0,
    bootId: str('bootId') ? (e.bootId as string) : '',
    agentTimeoutSec: num('agentTimeoutSec') ? (e.agentTimeoutSec as number) : 5,
    guardId: str('guardId') ? (e.guardId as string) : '',
    ...(num('guardPid') ? { guardPid: e.guardPid as number } : {}),
    ...(str('freezeId') ? { freezeId: e.freezeId as string } : {}),
    ...(num('previousAgentTimeout') ? { previousAgentTimeout: e.previousAgentTimeout as number } : {}),
  };
}

/** Write + fsync file and directory: the journal must survive a host crash right after freeze. */
async function writeDurably(file: string, text: string): Promise<void> {
  const tmp = `${file}.tmp`;
  const fh = await fs.open(tmp, 'w');
  try {
    await fh.writeFile(text);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await fs.rename(tmp, file);
  const dir = await fs.open(path.dirname(file), 'r');
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}
