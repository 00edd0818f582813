import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';

/**
 * Host freeze guard: a watchdog process per freeze that thaws the guest at its deadline unless
 * released first. It is spawned detached (own session) before the freeze call, so it fires even
 * when the worker is SIGKILLed, Temporal is unreachable or the workflow was terminated — the
 * cases where Temporal runs no compensation (temporalio/temporal#1412).
 *
 * Each arm is journaled (fsync'ed) before the freeze call; a starting worker reconciles the
 * journal and the sweeper reads it to know which frozen guests vmsnap is responsible for.
 */

export interface JournalEntry {
  domainUuid: string;
  domainName: string;
  /** Who froze it: `<workflowId>/<runId>` or `operator`. */
  owner: string;
  frozenAt: number;
  deadlineAt: number;
  guardPid?: number;
}

export interface FreezeGuardOptions {
  /** libvirt URI the watchdog's `virsh` uses. */
  libvirtUri: string;
  /** Host-local state directory (journal and guard markers). */
  stateDir: string;
  virsh?: string;
}

// A constant script: the domain, URI and paths travel as positional parameters, never spliced in.
const WATCHDOG = 'sleep "$1"; date +%s%3N > "$4"; exec "$5" -q -c "$2" domfsthaw --domain "$3"';

export class FreezeGuard {
  private readonly dir: string;
  constructor(private readonly opts: FreezeGuardOptions) {
    this.dir = path.join(opts.stateDir, 'frozen');
  }

  /** Journals the freeze and starts the watchdog. Call before virDomainFSFreeze. */
  async arm(entry: Omit<JournalEntry, 'guardPid' | 'frozenAt' | 'deadlineAt'> & { deadlineMs: number }): Promise<JournalEntry> {
    await fs.mkdir(this.dir, { recursive: true });
    // A watchdog left by an earlier attempt (dead worker, replayed task) must not fire into this freeze.
    const previous = await this.read(entry.domainUuid);
    if (previous?.guardPid) killGroup(previous.guardPid);
    await fs.rm(this.markerPath(entry.domainUuid), { force: true });
    const now = Date.now();
    const seconds = (entry.deadlineMs / 1000).toFixed(3);
    const child = spawn(
      '/bin/sh',
      ['-c', WATCHDOG, 'vmsnap-guard', seconds, this.opts.libvirtUri, entry.domainUuid, this.markerPath(entry.domainUuid), this.opts.virsh ?? 'virsh'],
      { detached: true, stdio: 'ignore' },
    );
    child.unref();
    const journaled: JournalEntry = {
      domainUuid: entry.domainUuid,
      domainName: entry.domainName,
      owner: entry.owner,
      frozenAt: now,
      deadlineAt: now + entry.deadlineMs,
      guardPid: child.pid,
    };
    await writeDurably(this.journalPath(entry.domainUuid), JSON.stringify(journaled));
    return journaled;
  }

  /**
   * Stops the watchdog. Returns when it fired (ms since epoch), or undefined when it had not:
   * a fired guard means the guest was thawed at its deadline, whatever the caller did after.
   */
  async release(domainUuid: string): Promise<{ guardFiredAt?: number }> {
    const entry = await this.read(domainUuid);
    if (entry?.guardPid) killGroup(entry.guardPid);
    const marker = await fs.readFile(this.markerPath(domainUuid), 'utf8').catch(() => undefined);
    const firedAt = marker ? Number(marker.trim()) : undefined;
    return firedAt && Number.isFinite(firedAt) ? { guardFiredAt: firedAt } : {};
  }

  /** Forgets a freeze once the guest is confirmed thawed. */
  async clear(domainUuid: string): Promise<void> {
    await fs.rm(this.journalPath(domainUuid), { force: true });
    await fs.rm(this.markerPath(domainUuid), { force: true });
  }

  async read(domainUuid: string): Promise<JournalEntry | undefined> {
    const text = await fs.readFile(this.journalPath(domainUuid), 'utf8').catch(() => undefined);
    return text ? (JSON.parse(text) as JournalEntry) : undefined;
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

  private journalPath(uuid: string): string {
    return path.join(this.dir, `${uuid}.json`);
  }
  private markerPath(uuid: string): string {
    return path.join(this.dir, `${uuid}.fired`);
  }
}

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // Already gone: it fired (the marker says so) or was released earlier.
  }
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
