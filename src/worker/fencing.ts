import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { RadosCluster } from '../ceph';
import type { Logger } from './logger';

/**
 * Fences the previous incarnation of this host's worker. A worker (or its snapshotter process)
 * that was SIGKILLed leaves its librados session's watches on the images it had open for ~30 s;
 * until they expire every new snapshot of those images waits on the dead watcher, far past the
 * snapshot bound. Each session's address is recorded in the state dir, and a starting worker
 * blocklists the ones its predecessor left, which drops their watches at once. Addresses carry a
 * per-session nonce, so no live client is ever hit.
 */
export class SessionFence {
  private readonly dir: string;
  constructor(stateDir: string) {
    this.dir = path.join(stateDir, 'sessions');
  }

  /** Blocklists every recorded session of a previous incarnation and forgets it. */
  async fencePrevious(cluster: RadosCluster, log: Logger): Promise<string[]> {
    const names = await fs.readdir(this.dir).catch(() => [] as string[]);
    const fenced: string[] = [];
    for (const name of names) {
      const file = path.join(this.dir, name);
      const addrs = (await fs.readFile(file, 'utf8').catch(() => '')).trim();
      if (addrs) {
        try {
          await cluster.addToBlocklist(addrs, 3600);
          fenced.push(addrs);
        } catch (err) {
          log.warn('could not fence a previous session', { session: name, addrs, error: String(err) });
        }
      }
      await fs.rm(file, { force: true });
    }
    if (fenced.length) log.warn('fenced the previous worker incarnation', { sessions: fenced });
    return fenced;
  }

  async record(kind: string, addrs: string): Promise<void> {
    await fs.mkdir(this.dir, { recursive: true });
    await fs.writeFile(path.join(this.dir, kind), addrs);
  }
}
