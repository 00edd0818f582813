/** vmsnap's libvirt adapter: a client of libvirt's RPC protocol plus a domain-XML reader. */
export { LibvirtClient, type CallOptions, type DomainState, type GuestExecStatus, type LibvirtConnectOptions } from './client';
export type { DomainRef } from './domain-ref';
export {
  ErrorCode,
  ErrorDomain,
  LibvirtAuthError,
  LibvirtConnectionError,
  LibvirtError,
  LibvirtTimeoutError,
  isAgentNotConfigured,
  isAgentUnresponsive,
  isAuthRefused,
  isFrozenState,
  isInvalidState,
  isNoDomain,
  isReadOnlyDenied,
} from './errors';
export type { AuthScheme } from './errors';
export type { Dialer } from './transport';
export { parseDomainXml, type DomainDisk, type DomainInfo, type RbdSource } from './domain-xml';
export { readAgentResponseTimeout, AGENT_TIMEOUT_LIBVIRT_START } from './agent-timeout';
