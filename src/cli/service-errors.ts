import { RbdError, isPermissionDenied } from '../ceph/errors';
import { CliError, Exit } from './exit-codes';

/*
 * What a service's refusal means for the exit code, decided in one place for every command: the
 * caller's request was wrong (2), the service is not there (4), or it is there and said no (6).
 * Anything else is a failure (1). No Temporal SDK import: main.ts uses this for every command,
 * and `vmsnap thaw` must not load the SDK; grpc-js errors and the SDK's are recognised by shape.
 */

/** grpc-js's ServiceError: a numeric status code and the trailers. */
function isGrpcError(e: unknown): e is Error & { code: number } {
  return e instanceof Error && typeof (e as { code?: unknown }).code === 'number' && 'metadata' in e;
}

function isWorkflowNotFound(e: unknown): boolean {
  return e instanceof Error && e.name === 'WorkflowNotFoundError';
}

/** The gRPC status code under the client's ServiceError wrapping, if any. */
export function grpcCode(err: unknown): number | undefined {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (isGrpcError(e)) return e.code;
  }
  return undefined;
}

// https://grpc.github.io/grpc/core/md_doc_statuscodes.html
const BAD_REQUEST = new Set([3 /* INVALID_ARGUMENT */, 5 /* NOT_FOUND */, 6 /* ALREADY_EXISTS */, 9 /* FAILED_PRECONDITION */, 11 /* OUT_OF_RANGE */]);
const UNREACHABLE = new Set([4 /* DEADLINE_EXCEEDED */, 14 /* UNAVAILABLE */]);
const REFUSED = new Set([7 /* PERMISSION_DENIED */, 16 /* UNAUTHENTICATED */]);

/** The exit code a Temporal call's error stands for. */
export function temporalExit(err: unknown): number {
  if (isWorkflowNotFound(err)) return Exit.badInput;
  const code = grpcCode(err);
  if (code === undefined) return Exit.failed;
  if (BAD_REQUEST.has(code)) return Exit.badInput;
  if (UNREACHABLE.has(code)) return Exit.unreachable;
  if (REFUSED.has(code)) return Exit.authRefused;
  return Exit.failed;
}

/** A Temporal call's error as a CliError saying what was being done. */
export function temporalFailure(doing: string, err: unknown): CliError {
  if (err instanceof CliError) return err;
  const code = temporalExit(err);
  const type = isWorkflowNotFound(err) || grpcCode(err) === 5 ? 'NotFound' : undefined;
  return new CliError(`${doing}: ${(err as Error).message}`, code, type);
}

/** EPERM/EACCES from librbd or librados: the cephx key lacks the capability. */
export function cephExit(err: unknown): number | undefined {
  if (isPermissionDenied(err)) return Exit.authRefused;
  return err instanceof RbdError ? Exit.failed : undefined;
}
