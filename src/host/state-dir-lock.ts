import { createHash } from 'node:crypto';
import { realpathSync, mkdirSync, writeFileSync, readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

/**
 * One worker per state directory. The lock is an abstract unix socket named after the state
 * dir's real path: binding it is atomic, and the kernel releases it the instant its process dies
 * (SIGKILL included), so "the lock was free" proves the previous holder is dead — the condition
 * under which reconcile may thaw its journaled freezes and fencing may blocklist its sessions.
 * Abstract sockets belong to a network namespace: workers sharing a state dir must share one
 * (every worker of a host does).
 */
export class StateDirLockedError extends Error {
  override name = 'StateDirLockedError';
}

export interface StateDirLock {
  release(): Promise<void>;
}

export async function lockStateDir(stateDir: string): Promise<StateDirLock> {
  mkdirSync(stateDir, { recursive: true });
  const real = realpathSync(stateDir);
  const name = `\0vmsnap-worker-${createHash('sha256').update(real).digest('hex').slice(0, 32)}`;
  const ownerFile = path.join(real, 'worker.owner');
  const server = net.createServer((s) => s.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EADDRINUSE') return reject(err);
      let holder = '';
      try {
        holder = readFileSync(ownerFile, 'utf8').trim();
      } catch {
        // the holder may not have written it yet
      }
      reject(
        new StateDirLockedError(
          `another vmsnap worker is running on state dir ${real}${holder ? ` (${holder})` : ''}; ` +
            'two workers on one state dir would thaw and fence each other. Stop it first, or give this one its own --state-dir.',
        ),
      );
    });
    server.listen(name, resolve);
  });
  server.unref();
  writeFileSync(ownerFile, `pid ${process.pid} since ${new Date().toISOString()}\n`);
  return {
    release: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
