import { ApplicationFailure } from '@temporalio/common';
import {
  isAgentNotConfigured,
  isAgentUnresponsive,
  isAuthRefused,
  isInvalidState,
  isNoDomain,
  LibvirtConnectionError,
  LibvirtError,
  LibvirtTimeoutError,
} from '../src/libvirt';
import { isBlocklisted, isPermissionDenied, isTimedOut, RbdError } from '../src/ceph';
import { FailureType } from '../src/model/failures';
import { isCancellation, StepError } from './step-error';

/*
 * The one edge where errors become Temporal failures: createActivities wraps every activity with
 * {@link atFailureEdge}, so no adapter error leaves a worker untranslated, and activities only
 * say what they were doing (step-error.ts).
 */

interface Verdict {
  type: FailureType;
  nonRetryable: boolean;
}

/**
 * Adapter error → failure type. Non-retryable where a retry cannot change the answer: the server
 * then fails fast instead of burning the retry budget on, say, a domain that does not exist.
 */
function classify(err: unknown): Verdict {
  const is = (type: FailureType, nonRetryable: boolean): Verdict => ({ type, nonRetryable });
  if (err instanceof ApplicationFailure) return is((err.type ?? FailureType.InternalError) as FailureType, err.nonRetryable === true);
  if (err instanceof LibvirtError) {
    if (isNoDomain(err)) return is(FailureType.DomainNotFound, true);
    if (isInvalidState(err)) return is(FailureType.DomainNotRunning, true);
    if (isAgentNotConfigured(err)) return is(FailureType.QuiesceUnavailable, true);
    if (isAgentUnresponsive(err)) return is(FailureType.Unavailable, false);
    return is(FailureType.LibvirtError, false);
  }
  if (err instanceof LibvirtTimeoutError || err instanceof LibvirtConnectionError) return is(FailureType.Unavailable, false);
  // libvirtd refused vmsnap (polkit said no, or SASL): only an operator's config change helps.
  if (isAuthRefused(err)) return is(FailureType.PermissionDenied, !err.retryable);
  if (err instanceof RbdError) {
    // A key without the capability, or a blocklisted client: refused on every retry.
    if (isPermissionDenied(err) || isBlocklisted(err)) return is(FailureType.PermissionDenied, true);
    if (isTimedOut(err)) return is(FailureType.Unavailable, false);
    return is(FailureType.RbdError, false);
  }
  return is(FailureType.InternalError, false);
}

/** The native code an adapter error carries, for the failure's details. */
function nativeCode(err: unknown): Record<string, unknown> {
  if (err instanceof LibvirtError) return { libvirtCode: err.code, libvirtDomain: err.domain, procedure: err.procedure };
  if (isAuthRefused(err)) return { libvirtAuthScheme: err.scheme, socket: err.socketPath, ...(err.code !== undefined ? { libvirtCode: err.code } : {}) };
  if (err instanceof RbdError) return { errno: err.errno, code: err.code, call: err.call };
  return {};
}

/**
 * What an activity threw, as the failure the workflow sees. ApplicationFailures an activity built
 * and cancellations pass through unchanged; a {@link StepError} is translated from its cause (and
 * its step type); anything else from itself. The raw error stays as the failure's cause.
 */
export function toFailure(err: unknown): unknown {
  if (isCancellation(err) || err instanceof ApplicationFailure) return err;
  const raw = err instanceof StepError ? err.cause : err;
  if (isCancellation(raw)) return raw;
  let verdict = classify(raw);
  const as = err instanceof StepError ? err.as : undefined;
  if (as && !as.keep?.includes(verdict.type)) verdict = { type: as.type, nonRetryable: as.nonRetryable };
  const details = raw instanceof ApplicationFailure ? [...(raw.details ?? [])] : [nativeCode(raw)];
  const facts = err instanceof StepError ? err.facts : undefined;
  return ApplicationFailure.create({
    message: err instanceof Error ? err.message : String(err),
    type: verdict.type,
    nonRetryable: verdict.nonRetryable,
    details: facts ? [...details, facts] : details.length ? details : undefined,
    cause: raw instanceof Error ? raw : undefined,
  });
}

/** `activities` with every function's rejections passed through {@link toFailure}. */
export function atFailureEdge<T extends Record<string, (...args: never[]) => Promise<unknown>>>(activities: T): T {
  const wrapped: Record<string, (...args: never[]) => Promise<unknown>> = {};
  for (const [name, fn] of Object.entries(activities)) {
    // A named function expression keeps the activity's name in stack traces.
    wrapped[name] = {
      async [name](...args: never[]) {
        try {
          return await fn(...args);
        } catch (err) {
          throw toFailure(err);
        }
      },
    }[name]!;
  }
  return wrapped as T;
}
