import { native } from '../../src/ceph/native';

/**
 * Makes the addon's next rbd_close report `errno` after it really closed the image: librbd 16's
 * own close errors are rare and timing-bound (a blocklisted client's close returned 0 in every
 * probe), and what must hold after one (handle gone, nothing closed twice) needs it on demand.
 */
export function injectCloseError(errno: number): void {
  native().injectCloseError(errno);
}
