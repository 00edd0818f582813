/**
 * Errors of the libvirt client. A failed RPC carries libvirt's `remote_error` (code, domain,
 * level, message) unchanged, so callers decide on libvirt's numbers, not on our wording.
 */
import type { XdrReader } from './xdr';

/** virErrorNumber values vmsnap decides on (libvirt's include/libvirt/virterror.h). */
export const ErrorCode = {
  OK: 0,
  INTERNAL_ERROR: 1,
  NO_SUPPORT: 3,
  INVALID_ARG: 8,
  OPERATION_FAILED: 9,
  OPERATION_DENIED: 29,
  SYSTEM_ERROR: 38,
  RPC: 39,
  NO_DOMAIN: 42,
  AUTH_FAILED: 45,
  OPERATION_INVALID: 55,
  OPERATION_TIMEOUT: 68,
  ARGUMENT_UNSUPPORTED: 74,
  AUTH_CANCELLED: 79,
  AGENT_UNRESPONSIVE: 86,
  AUTH_UNAVAILABLE: 94,
} as const;

/** virErrorDomain values seen in vmsnap's error paths. */
export const ErrorDomain = {
  QEMU: 10,
} as const;

export interface LibvirtErrorFields {
  code: number;
  domain: number;
  level: number;
  message: string;
  procedure: string;
}

/** An error reported by libvirtd for one RPC; `message` is libvirt's own text. */
export class LibvirtError extends Error {
  override readonly name = 'LibvirtError';
  readonly code: number;
  readonly domain: number;
  readonly level: number;
  readonly procedure: string;

  constructor(fields: LibvirtErrorFields) {
    super(fields.message);
    this.code = fields.code;
    this.domain = fields.domain;
    this.level = fields.level;
    this.procedure = fields.procedure;
  }
}

/**
 * The client stopped waiting. libvirtd may still run the call to completion (a freeze can
 * still freeze the guest), so callers must treat the remote state as unknown.
 */
export class LibvirtTimeoutError extends Error {
  override readonly name = 'LibvirtTimeoutError';
  constructor(
    readonly procedure: string,
    readonly timeoutMs: number,
  ) {
    super(`${procedure}: no reply from libvirtd within ${timeoutMs} ms`);
  }
}

/** The socket could not be opened or closed under a call; whether the call ran is unknown. */
export class LibvirtConnectionError extends Error {
  override readonly name = 'LibvirtConnectionError';
}

/** How a libvirtd socket wants its clients to authenticate (remote_protocol.x `remote_auth_type`). */
export type AuthScheme = 'none' | 'sasl' | 'polkit' | `unknown (${number})`;

export interface LibvirtAuthErrorFields {
  /** The scheme libvirtd's socket is configured with (its `auth_unix_rw` / `auth_unix_ro`). */
  scheme: AuthScheme;
  socketPath: string;
  /** What the operator changes so that vmsnap gets in. */
  fix: string;
  /** Only when libvirtd could not ask polkitd (it may answer later); a refusal or an unsupported scheme repeats on every retry. */
  retryable: boolean;
  /** libvirtd's own error, when it refused an authentication call. */
  cause?: LibvirtError;
}

/**
 * libvirtd did not let this client in: its socket wants a scheme vmsnap does not speak (SASL), or
 * it refused the polkit check for this process's uid. No call after CONNECT_OPEN ran; nothing in
 * any guest changed. Raised once, by the connection's authentication step (auth.ts), so every
 * caller sees the same type whatever it was doing.
 */
export class LibvirtAuthError extends Error {
  override readonly name = 'LibvirtAuthError';
  readonly scheme: AuthScheme;
  readonly socketPath: string;
  /** What happened, without the fix (the message carries both). */
  readonly reason: string;
  readonly fix: string;
  readonly retryable: boolean;
  /** libvirt's error number when libvirtd refused the call (45 AUTH_FAILED, 94 AUTH_UNAVAILABLE...). */
  readonly code: number | undefined;

  constructor(reason: string, fields: LibvirtAuthErrorFields) {
    super(`${reason}; fix: ${fields.fix}`, fields.cause ? { cause: fields.cause } : undefined);
    this.reason = reason;
    this.scheme = fields.scheme;
    this.socketPath = fields.socketPath;
    this.fix = fields.fix;
    this.retryable = fields.retryable;
    this.code = fields.cause?.code;
  }
}

/** Decodes `remote_error` (virnetprotocol.x `virNetMessageError`) from an error reply payload. */
export function decodeRemoteError(r: XdrReader, procedure: string): LibvirtError {
  const code = r.int();
  const domain = r.int();
  const message = r.optionalString();
  const level = r.int();
  // dom, str1..3, int1, int2 and net follow; libvirt fills `message` from them already.
  return new LibvirtError({
    code,
    domain,
    level,
    message: message ?? `libvirt error code ${code}`,
    procedure,
  });
}

function hasCode(e: unknown, code: number): e is LibvirtError {
  return e instanceof LibvirtError && e.code === code;
}

/** libvirtd refused this client's authentication, or wants a scheme vmsnap does not implement. */
export function isAuthRefused(e: unknown): e is LibvirtAuthError {
  return e instanceof LibvirtAuthError;
}

/** VIR_ERR_NO_DOMAIN (42): no domain with that name or UUID. */
export function isNoDomain(e: unknown): boolean {
  return hasCode(e, ErrorCode.NO_DOMAIN);
}

/** VIR_ERR_AGENT_UNRESPONSIVE (86): qemu-ga dead, hung past the agent timeout, or not connected. */
export function isAgentUnresponsive(e: unknown): boolean {
  return hasCode(e, ErrorCode.AGENT_UNRESPONSIVE);
}

/**
 * VIR_ERR_ARGUMENT_UNSUPPORTED (74) with libvirt's "guest agent is not configured" text: the
 * domain has no agent channel. 74 alone is also used for bad flags, hence the message check.
 */
export function isAgentNotConfigured(e: unknown): boolean {
  return hasCode(e, ErrorCode.ARGUMENT_UNSUPPORTED) && /guest agent is not configured/i.test(e.message);
}

/** VIR_ERR_INTERNAL_ERROR (1) "agent is in frozen state": a freeze while already frozen. */
export function isFrozenState(e: unknown): boolean {
  return hasCode(e, ErrorCode.INTERNAL_ERROR) && /agent is in frozen state/i.test(e.message);
}

/** VIR_ERR_OPERATION_DENIED (29): a read-only connection asked for a read-write call. */
export function isReadOnlyDenied(e: unknown): boolean {
  return hasCode(e, ErrorCode.OPERATION_DENIED);
}

/** VIR_ERR_OPERATION_INVALID (55): e.g. the domain is paused or shut off. */
export function isInvalidState(e: unknown): boolean {
  return hasCode(e, ErrorCode.OPERATION_INVALID);
}
