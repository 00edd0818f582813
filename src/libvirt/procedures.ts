/**
 * Program and procedure numbers of libvirt's RPC protocol, from libvirt's
 * src/remote/remote_protocol.x, src/remote/qemu_protocol.x and src/rpc/virkeepaliveprotocol.x.
 * Only the procedures vmsnap calls are listed; the numbers are wire ABI and never change.
 */

/** REMOTE_PROGRAM: the main libvirt API. */
export const REMOTE_PROGRAM = 0x20008086;
/** QEMU_PROGRAM: QEMU-specific calls (monitor and guest agent pass-through). */
export const QEMU_PROGRAM = 0x20008087;
/** KEEPALIVE_PROGRAM ("keep" in ASCII). */
export const KEEPALIVE_PROGRAM = 0x6b656570;
/** Every program above is at version 1. */
export const PROTOCOL_VERSION = 1;

export const RemoteProcedure = {
  CONNECT_OPEN: 1,
  CONNECT_CLOSE: 2,
  DOMAIN_CREATE: 9,
  DOMAIN_DEFINE_XML: 11,
  DOMAIN_DESTROY: 12,
  DOMAIN_GET_XML_DESC: 14,
  DOMAIN_LOOKUP_BY_NAME: 23,
  DOMAIN_LOOKUP_BY_UUID: 24,
  CONNECT_SUPPORTS_FEATURE: 60,
  AUTH_LIST: 66,
  AUTH_SASL_INIT: 67,
  AUTH_POLKIT: 70,
  DOMAIN_GET_STATE: 212,
  NODE_GET_MEMORY_STATS: 228,
  DOMAIN_UNDEFINE_FLAGS: 231,
  DOMAIN_SHUTDOWN_FLAGS: 258,
  CONNECT_LIST_ALL_DOMAINS: 273,
  DOMAIN_FSFREEZE: 335,
  DOMAIN_FSTHAW: 336,
  DOMAIN_AGENT_SET_RESPONSE_TIMEOUT: 420,
} as const;

export const QemuProcedure = {
  DOMAIN_AGENT_COMMAND: 3,
} as const;

export const KeepaliveProcedure = {
  PING: 1,
  PONG: 2,
} as const;

/** Names for error messages and LibvirtError.procedure, keyed by `${program}:${procedure}`. */
const NAMES = new Map<string, string>([
  ...Object.entries(RemoteProcedure).map(([k, v]) => [`${REMOTE_PROGRAM}:${v}`, `REMOTE_PROC_${k}`] as const),
  ...Object.entries(QemuProcedure).map(([k, v]) => [`${QEMU_PROGRAM}:${v}`, `QEMU_PROC_${k}`] as const),
  ...Object.entries(KeepaliveProcedure).map(([k, v]) => [`${KEEPALIVE_PROGRAM}:${v}`, `KEEPALIVE_PROC_${k}`] as const),
]);

export function procedureName(program: number, procedure: number): string {
  return NAMES.get(`${program}:${procedure}`) ?? `0x${program.toString(16)}:${procedure}`;
}

/** VIR_DRV_FEATURE_PROGRAM_KEEPALIVE: asking about it tells libvirtd we answer its pings. */
export const FEATURE_PROGRAM_KEEPALIVE = 10;

/** remote_auth_type: what REMOTE_PROC_AUTH_LIST returns, one per scheme the socket accepts. */
export const AuthType = {
  NONE: 0,
  SASL: 1,
  POLKIT: 2,
} as const;
/** REMOTE_AUTH_TYPE_LIST_MAX */
export const AUTH_TYPE_LIST_MAX = 20;

/** virConnectFlags */
export const CONNECT_RO = 1;
/** virConnectListAllDomainsFlags */
export const LIST_DOMAINS_ACTIVE = 1;
/** virDomainXMLFlags */
export const DOMAIN_XML_INACTIVE = 2;
/** virDomainShutdownFlagValues */
export const SHUTDOWN_ACPI_POWER_BTN = 1;
export const SHUTDOWN_GUEST_AGENT = 2;
