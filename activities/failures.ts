import { ApplicationFailure } from '@temporalio/common';
import {
  isAgentNotConfigured,
  isAgentUnresponsive,
  isInvalidState,
  isNoDomain,
  LibvirtConnectionError,
  LibvirtError,
  LibvirtTimeoutError,
} from '../src/libvirt';
import { RbdError } from '../src/ceph';
import { FailureType } from '../src/model/failures';

/**
 * The one place where adapter errors (libvirt codes, errnos) become Temporal failure types.
 * Non-retryable where a retry cannot change the answer: the server then fails fast instead of
 * burning the retry budget on, say, a domain that does not exist.
 */
export function toFailure(err: unknown, doing: string): ApplicationFailure {
  if (err instanceof ApplicationFailure) return err;
  const msg = `${doing}: ${err instanceof Error ? err.message : String(err)}`;
  const details = [nativeCode(err)];
  if (err instanceof LibvirtError) {
    if (isNoDomain(err)) return ApplicationFailure.nonRetryable(msg, FailureType.DomainNotFound, ...details);
    if (isInvalidState(err)) return ApplicationFailure.nonRetryable(msg, FailureType.DomainNotRunning, ...details);
    if (isAgentNotConfigured(err)) return ApplicationFailure.nonRetryable(msg, FailureType.QuiesceUnavailable, ...details);
    if (isAgentUnresponsive(err)) return ApplicationFailure.retryable(msg, FailureType.Unavailable, ...details);
    return ApplicationFailure.retryable(msg, 'LibvirtError', ...details);
  }
  if (err instanceof LibvirtTimeoutError || err instanceof LibvirtConnectionError) {
    return ApplicationFailure.retryable(msg, FailureType.Unavailable, ...details);
  }
  if (err instanceof RbdError) {
    if (err.errno === 1 || err.errno === 13 || err.errno === 108) {
      // EPERM/EACCES/ESHUTDOWN (blocklisted): the key or the client is refused; retrying won't help.
      return ApplicationFailure.nonRetryable(msg, FailureType.PermissionDenied, ...details);
    }
    if (err.errno === 110) return ApplicationFailure.retryable(msg, FailureType.Unavailable, ...details);
    return ApplicationFailure.retryable(msg, 'RbdError', ...details);
  }
  return ApplicationFailure.retryable(msg, 'InternalError', ...details);
}

function nativeCode(err: unknown): Record<string, unknown> {
  if (err instanceof LibvirtError) return { libvirtCode: err.code, libvirtDomain: err.domain, procedure: err.procedure };
  if (err instanceof RbdError) return { errno: err.errno, code: err.code, call: err.call };
  return {};
}

/** Runs an adapter call and translates whatever it throws. */
export async function translating<T>(doing: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw toFailure(err, doing);
  }
}
