import type { Image } from './image';
import { runLongCall, type LongCallOptions } from './long-call';
import { native } from './native';

/*
 * Flatten: copy the parent's data into a clone and drop the link. Ceph 16.2.15 hazard (tracker
 * 68998): an interrupted flatten that is simply run again returns 0 but can leave objects
 * reading as zeros. Never re-run a flatten on a clone whose flatten was interrupted (aborted,
 * worker killed): remove the clone and clone again, then verify with Image.checksum().
 */

export type FlattenOptions = LongCallOptions;

/**
 * rbd_flatten_with_progress on an addon thread. `signal` aborts: the progress callback returns
 * non-zero and the promise rejects with RbdError ECANCELED (cause: the abort reason).
 * EINVAL (22) when the image has no parent.
 */
export function flatten(image: Image, o: FlattenOptions = {}): Promise<void> {
  return runLongCall('rbd_flatten_with_progress', (cb) => native().flatten(image.handle, cb), o);
}
