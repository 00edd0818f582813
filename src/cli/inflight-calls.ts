import type { ConnectionOptions } from '@temporalio/client';

type Interceptor = NonNullable<ConnectionOptions['interceptors']>[number];
/** grpc-js's InterceptingCall class; grpc-js itself accepts any object with its interface. */
type InterceptingCall = ReturnType<Interceptor>;

/**
 * Counts a connection's gRPC calls from start to final status, so the CLI can wait for them
 * before it closes the connection.
 *
 * Why: a call still in flight when the channel closes ends UNAVAILABLE; the SDK's retry
 * interceptor (`@temporalio/client/lib/grpc-retry.js`) then schedules a retry on a timer, and
 * that timer throws `Channel has been shut down` outside any promise: an uncaught exception,
 * exit 1, after the command had printed its success. Placed first in the interceptor list, this
 * one sees a call's final status only after every retry, so "idle" means no retry timer is left.
 */
export class InflightCalls {
  private count = 0;
  private waiters: (() => void)[] = [];

  readonly interceptor: Interceptor = (options, nextCall) => {
    const call = nextCall(options);
    const start = call.start.bind(call);
    call.start = (metadata, listener) => {
      this.count++;
      let settled = false;
      start(metadata, {
        onReceiveMetadata: (m) => listener?.onReceiveMetadata?.(m),
        onReceiveMessage: (m) => listener?.onReceiveMessage?.(m),
        onReceiveStatus: (status) => {
          try {
            listener?.onReceiveStatus?.(status);
          } finally {
            if (!settled) {
              settled = true;
              this.settle();
            }
          }
        },
      });
    };
    return call as InterceptingCall;
  };

  get inflight(): number {
    return this.count;
  }

  /** Resolves when no call is in flight, or after `limitMs` (true: idle; false: gave up). */
  idle(limitMs: number): Promise<boolean> {
    if (this.count === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== done);
        resolve(false);
      }, limitMs);
      const done = () => {
        clearTimeout(timer);
        resolve(true);
      };
      this.waiters.push(done);
    });
  }

  private settle(): void {
    this.count--;
    if (this.count > 0) return;
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}
