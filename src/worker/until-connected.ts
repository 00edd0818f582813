import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from './logger';

/**
 * Retries a start-up connection until it succeeds or `signal` aborts. A worker whose Ceph or
 * Temporal is down at start stays up — its sweeper keeps thawing — instead of exiting and taking
 * the host's last freeze safety net with it.
 */
export async function untilConnected<T>(what: string, log: Logger, signal: AbortSignal | undefined, connect: () => Promise<T>): Promise<T> {
  let delayMs = 1000;
  for (let attempt = 1; ; attempt++) {
    signal?.throwIfAborted();
    try {
      const v = await connect();
      if (attempt > 1) log.info(`${what} reachable after ${attempt} attempts`);
      return v;
    } catch (err) {
      if (signal?.aborted) throw err;
      log.warn(`${what} unreachable at start; retrying (the sweeper keeps running)`, { attempt, retryInMs: delayMs, error: String(err) });
    }
    await sleep(delayMs, undefined, signal ? { signal } : undefined);
    delayMs = Math.min(delayMs * 2, 15_000);
  }
}
