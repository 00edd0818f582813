import { describe, expect, it } from 'vitest';
import {
  RbdError, isBlocklisted, isBusy, isCanceled, isExists, isInvalid, isNotEmpty, isNotFound, isPermissionDenied, isTimedOut,
} from '../../src/ceph/errors';
import { rbdCall } from '../../src/ceph/errors';

describe('RbdError', () => {
  it('keeps errno, code and call, and formats like "call: CODE (n)"', () => {
    const e = new RbdError(-17, 'rbd_snap_create');
    expect(e).toBeInstanceOf(Error);
    expect(e).toMatchObject({ name: 'RbdError', errno: 17, code: 'EEXIST', call: 'rbd_snap_create' });
    expect(e.message).toBe('rbd_snap_create: EEXIST (17)');
  });

  it('names unknown errnos E<n>', () => {
    expect(new RbdError(4242, 'rbd_x').code).toBe('E4242');
  });

  it.each([
    [isNotFound, 2], [isExists, 17], [isBusy, 16], [isInvalid, 22], [isTimedOut, 110], [isCanceled, 125], [isNotEmpty, 39],
  ] as const)('%o matches errno %i only', (helper, errno) => {
    expect(helper(new RbdError(errno, 'c'))).toBe(true);
    expect(helper(new RbdError(errno === 2 ? 17 : 2, 'c'))).toBe(false);
    expect(helper(Object.assign(new Error('x'), { errno }))).toBe(false); // not an RbdError
    expect(helper(undefined)).toBe(false);
  });

  it.each([
    [isPermissionDenied, [1, 13]], [isBlocklisted, [108]],
  ] as const)('%o matches errnos %o only', (helper, errnos) => {
    for (const errno of errnos) expect(helper(new RbdError(errno, 'c'))).toBe(true);
    for (const errno of [2, 5, 16, 110].filter((e) => !(errnos as readonly number[]).includes(e))) expect(helper(new RbdError(errno, 'c'))).toBe(false);
    expect(helper(Object.assign(new Error('x'), { errno: errnos[0] }))).toBe(false);
  });

  it('names ESHUTDOWN, which Node\'s errno table lacks (a blocklisted client)', () => {
    expect(new RbdError(-108, 'rbd_open').message).toBe('rbd_open: ESHUTDOWN (108)');
  });

  it('rbdCall translates the addon rejection shape into RbdError', async () => {
    const native = Object.assign(new Error('rbd_open: ENOENT (2)'), { errno: 2, code: 'ENOENT', call: 'rbd_open' });
    const err = await rbdCall(() => Promise.reject(native)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RbdError);
    expect(err).toMatchObject({ errno: 2, code: 'ENOENT', call: 'rbd_open' });
    const other = new TypeError('bad');
    expect(await rbdCall(() => Promise.reject(other)).catch((e: unknown) => e)).toBe(other);
    expect(await rbdCall(() => Promise.resolve(5))).toBe(5);
  });
});
