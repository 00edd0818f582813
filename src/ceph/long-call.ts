import { constants } from 'node:os';
import { RbdError, rbdCall } from './errors';
import type { Cancellable, ProgressFn } from './native';

export interface LongCallOptions {
  /** Called on the JS thread with (done, total) as librbd reports progress (coalesced). */
  onProgress?(done: number, total: number): void;
  /** Aborting makes librbd's progress callback return non-zero; the call rejects ECANCELED. */
  signal?: AbortSignal;
}

/**
 * Runs a native call that reports progress and can be stopped (flatten, remove). A throwing
 * onProgress stops the call too, and its error is what the promise rejects with.
 */
export async function runLongCall(
  call: string,
  start: (onProgress: ProgressFn | undefined) => Cancellable,
  o: LongCallOptions = {},
): Promise<void> {
  const { signal, onProgress } = o;
  if (signal?.aborted) throw new RbdError(constants.errno.ECANCELED, call, { cause: signal.reason });
  let callbackError: { error: unknown } | undefined;
  const native: { cancel?: () => void } = {};
  const progress: ProgressFn | undefined = onProgress
    ? (done, total) => {
        if (callbackError) return;
        try {
          onProgress(done, total);
        } catch (error) {
          callbackError = { error };
          native.cancel?.();
        }
      }
    : undefined;
  const [promise, cancelNative] = start(progress);
  native.cancel = cancelNative;
  const onAbort = (): void => cancelNative();
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    await rbdCall(() => promise);
  } catch (e) {
    if (callbackError) throw callbackError.error;
    if (e instanceof RbdError && e.errno === constants.errno.ECANCELED && signal?.aborted) {
      throw new RbdError(e.errno, e.call, { cause: signal.reason });
    }
    throw e;
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
  if (callbackError) throw callbackError.error;
}
