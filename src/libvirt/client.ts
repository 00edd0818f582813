/**
 * The hand-written facade over libvirt's RPC protocol: one method per libvirt API vmsnap needs,
 * each one remote procedure. Reconnects transparently after libvirtd restarts (a running QEMU
 * and its frozen guest outlive libvirtd, so the next call must reach the new daemon); see
 * connection-pool.ts for that and for why there may be several connections.
 */
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { resolveEndpoint } from './connect-uri';
import { isUuid, readDomain, uuidToBytes, writeDomain, type DomainRef } from './domain-ref';
import { ConnectionPool } from './connection-pool';
import { LibvirtError } from './errors';
import {
  DOMAIN_XML_INACTIVE, LIST_DOMAINS_ACTIVE, QEMU_PROGRAM, QemuProcedure, REMOTE_PROGRAM, RemoteProcedure,
  SHUTDOWN_ACPI_POWER_BTN, SHUTDOWN_GUEST_AGENT,
} from './procedures';
import type { Dialer } from './transport';
import { XdrReader, XdrWriter } from './xdr';

export interface LibvirtConnectOptions {
  /** e.g. `qemu:///system?socket=/path/libvirt-sock`; default `qemu:///system`. */
  uri?: string;
  /** Overrides the socket named by `uri`. */
  socketPath?: string;
  readOnly?: boolean;
  /** Client-side limit per call; default 30000. */
  callTimeoutMs?: number;
  /** If set, ping libvirtd this often and treat 5 silent intervals as a dead connection. */
  keepaliveIntervalMs?: number;
  /** Calls in flight per connection before another is opened; libvirtd's max_client_requests, default 5. */
  maxCallsPerConnection?: number;
  /** Upper bound on connections; beyond it calls queue in libvirtd. Default 8. */
  maxConnections?: number;
  /** Replaces the unix socket, for tests that replay recorded bytes. */
  dialer?: Dialer;
}

export interface CallOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** What qemu-ga's `guest-exec-status` says about a process `guest-exec` started. */
export interface GuestExecStatus {
  exited: boolean;
  exitCode?: number;
  /** The signal that ended it (qemu-ga reports it instead of an exit code). */
  signal?: number;
  stdout?: string;
  stderr?: string;
}

interface RawExecStatus {
  exited?: unknown;
  exitcode?: number;
  signal?: number;
  'out-data'?: string;
  'err-data'?: string;
}

export type DomainState = 'nostate' | 'running' | 'blocked' | 'paused' | 'shutdown' | 'shutoff' | 'crashed' | 'pmsuspended';

/** virDomainState, indexed by its numeric value. */
const DOMAIN_STATES: readonly DomainState[] = ['nostate', 'running', 'blocked', 'paused', 'shutdown', 'shutoff', 'crashed', 'pmsuspended'];

/** Slack over a guest-agent timeout, so libvirt's own agent timeout (86) wins over ours. */
const AGENT_TIMEOUT_SLACK_MS = 5_000;

type Encode = (w: XdrWriter) => void;

/** VIR_NODE_MEMORY_STATS_ALL_CELLS, and REMOTE_NODE_MEMORY_STATS_MAX. */
const ALL_CELLS = -1;
const MEMORY_STATS_MAX = 16;

function readMemoryStat(r: XdrReader): { field: string; value: bigint } {
  return { field: r.string(), value: r.uhyper() };
}

export class LibvirtClient {
  private readonly callTimeoutMs: number;

  private constructor(private readonly pool: ConnectionPool, callTimeoutMs: number) {
    this.callTimeoutMs = callTimeoutMs;
  }

  /**
   * Opens the socket, authenticates as libvirt's client does (REMOTE_PROC_AUTH_LIST, then polkit or
   * none; SASL fails with LibvirtAuthError) and runs REMOTE_PROC_CONNECT_OPEN (virConnectOpen).
   */
  static async connect(options: LibvirtConnectOptions = {}): Promise<LibvirtClient> {
    const { socketPath, openName } = resolveEndpoint(options);
    const callTimeoutMs = options.callTimeoutMs ?? 30_000;
    const pool = new ConnectionPool({
      dial: options.dialer ?? (() => dialUnix(socketPath)),
      openName,
      endpoint: options.dialer ? `${socketPath} (custom dialer)` : socketPath,
      readOnly: options.readOnly ?? false,
      callTimeoutMs,
      keepaliveIntervalMs: options.keepaliveIntervalMs,
      maxCallsPerConnection: options.maxCallsPerConnection ?? 5,
      maxConnections: options.maxConnections ?? 8,
    });
    await pool.warm();
    return new LibvirtClient(pool, callTimeoutMs);
  }

  /** REMOTE_PROC_CONNECT_CLOSE (virConnectClose) on every connection, then closes them. Pending calls fail. */
  close(): Promise<void> {
    return this.pool.close();
  }

  /** REMOTE_PROC_DOMAIN_LOOKUP_BY_NAME (virDomainLookupByName). */
  async lookupDomainByName(name: string, opts?: CallOptions): Promise<DomainRef> {
    const r = await this.remote(RemoteProcedure.DOMAIN_LOOKUP_BY_NAME, (w) => w.string(name), opts);
    return readDomain(r);
  }

  /** REMOTE_PROC_DOMAIN_LOOKUP_BY_UUID (virDomainLookupByUUID). */
  async lookupDomainByUuid(uuid: string, opts?: CallOptions): Promise<DomainRef> {
    const bytes = uuidToBytes(uuid);
    const r = await this.remote(RemoteProcedure.DOMAIN_LOOKUP_BY_UUID, (w) => w.fixedOpaque(bytes), opts);
    return readDomain(r);
  }

  /** By UUID when the string is UUID-shaped, else by name. */
  lookupDomain(nameOrUuid: string, opts?: CallOptions): Promise<DomainRef> {
    return isUuid(nameOrUuid) ? this.lookupDomainByUuid(nameOrUuid, opts) : this.lookupDomainByName(nameOrUuid, opts);
  }

  /**
   * REMOTE_PROC_CONNECT_LIST_ALL_DOMAINS (virConnectListAllDomains): the running domains
   * (VIR_CONNECT_LIST_DOMAINS_ACTIVE), or with `which: 'defined'` every domain this host has a
   * definition of, running or shut off (flags 0).
   */
  async listDomains(opts?: CallOptions & { which?: 'running' | 'defined' }): Promise<DomainRef[]> {
    const flags = opts?.which === 'defined' ? 0 : LIST_DOMAINS_ACTIVE;
    const r = await this.remote(RemoteProcedure.CONNECT_LIST_ALL_DOMAINS, (w) => w.int(1).uint(flags), opts);
    const domains = r.array(readDomain, 16_384);
    r.uint(); // count, equal to domains.length
    return domains;
  }

  /**
   * REMOTE_PROC_NODE_GET_MEMORY_STATS (virNodeGetMemoryStats) for all cells, in KiB by libvirt's
   * field names (Linux: total, free, buffers, cached). Called twice, as libvirt's own client does:
   * nparams 0 asks how many fields there are.
   */
  async nodeMemoryStats(opts?: CallOptions): Promise<Record<string, number>> {
    const ask = (n: number) => this.remote(RemoteProcedure.NODE_GET_MEMORY_STATS, (w) => w.int(n).int(ALL_CELLS).uint(0), opts);
    const first = await ask(0);
    first.array(readMemoryStat, MEMORY_STATS_MAX);
    const r = await ask(first.int());
    const out: Record<string, number> = {};
    for (const s of r.array(readMemoryStat, MEMORY_STATS_MAX)) out[s.field] = Number(s.value);
    r.int();
    return out;
  }

  /** REMOTE_PROC_DOMAIN_GET_STATE (virDomainGetState). `reason` is the state-specific reason enum. */
  async getDomainState(dom: DomainRef, opts?: CallOptions): Promise<{ state: DomainState; reason: number }> {
    const r = await this.remote(RemoteProcedure.DOMAIN_GET_STATE, (w) => (writeDomain(w, dom), w.uint(0)), opts);
    const code = r.int();
    const reason = r.int();
    return { state: DOMAIN_STATES[code] ?? 'nostate', reason };
  }

  /** REMOTE_PROC_DOMAIN_GET_XML_DESC (virDomainGetXMLDesc); `inactive` = VIR_DOMAIN_XML_INACTIVE. */
  async getDomainXml(dom: DomainRef, opts?: CallOptions & { inactive?: boolean }): Promise<string> {
    const flags = opts?.inactive ? DOMAIN_XML_INACTIVE : 0;
    const r = await this.remote(RemoteProcedure.DOMAIN_GET_XML_DESC, (w) => (writeDomain(w, dom), w.uint(flags)), opts);
    return r.string();
  }

  /**
   * REMOTE_PROC_DOMAIN_DEFINE_XML (virDomainDefineXML): defines (or, for a known name and UUID,
   * redefines) a persistent domain; returns its ref.
   */
  async domainDefineXml(xml: string, opts?: CallOptions): Promise<DomainRef> {
    const r = await this.remote(RemoteProcedure.DOMAIN_DEFINE_XML, (w) => w.string(xml), opts);
    return readDomain(r);
  }

  /** REMOTE_PROC_DOMAIN_CREATE (virDomainCreate): starts a defined domain. */
  async domainCreate(dom: DomainRef, opts?: CallOptions): Promise<void> {
    await this.remote(RemoteProcedure.DOMAIN_CREATE, (w) => writeDomain(w, dom), opts);
  }

  /** REMOTE_PROC_DOMAIN_DESTROY (virDomainDestroy): hard power-off of a running domain. */
  async domainDestroy(dom: DomainRef, opts?: CallOptions): Promise<void> {
    await this.remote(RemoteProcedure.DOMAIN_DESTROY, (w) => writeDomain(w, dom), opts);
  }

  /**
   * REMOTE_PROC_DOMAIN_SHUTDOWN_FLAGS (virDomainShutdownFlags): asks the guest to power off, through
   * the agent and/or the ACPI power button. Returns at once; poll the state for the result.
   */
  async domainShutdownFlags(dom: DomainRef, via: { agent?: boolean; acpi?: boolean } = {}, opts?: CallOptions): Promise<void> {
    const flags = (via.agent ? SHUTDOWN_GUEST_AGENT : 0) | (via.acpi ? SHUTDOWN_ACPI_POWER_BTN : 0);
    await this.remote(RemoteProcedure.DOMAIN_SHUTDOWN_FLAGS, (w) => (writeDomain(w, dom), w.uint(flags)), opts);
  }

  /** REMOTE_PROC_DOMAIN_UNDEFINE_FLAGS (virDomainUndefineFlags): removes the persistent definition. */
  async domainUndefineFlags(dom: DomainRef, flags = 0, opts?: CallOptions): Promise<void> {
    await this.remote(RemoteProcedure.DOMAIN_UNDEFINE_FLAGS, (w) => (writeDomain(w, dom), w.uint(flags)), opts);
  }

  /**
   * REMOTE_PROC_DOMAIN_FSFREEZE (virDomainFSFreeze): freezes all (or the given) guest filesystems
   * and returns how many froze. 0 means nothing froze, e.g. an unknown mountpoint.
   */
  async fsFreeze(dom: DomainRef, mountpoints: string[] = [], opts?: CallOptions): Promise<number> {
    const r = await this.remote(RemoteProcedure.DOMAIN_FSFREEZE, (w) => encodeMountpoints(w, dom, mountpoints), opts);
    return r.int();
  }

  /** REMOTE_PROC_DOMAIN_FSTHAW (virDomainFSThaw): returns how many filesystems thawed (0 if none were frozen). */
  async fsThaw(dom: DomainRef, mountpoints: string[] = [], opts?: CallOptions): Promise<number> {
    const r = await this.remote(RemoteProcedure.DOMAIN_FSTHAW, (w) => encodeMountpoints(w, dom, mountpoints), opts);
    return r.int();
  }

  /**
   * REMOTE_PROC_DOMAIN_AGENT_SET_RESPONSE_TIMEOUT (virDomainAgentSetResponseTimeout): how long
   * libvirtd waits for qemu-ga on agent-backed calls such as FSFreeze. -2 blocks forever (the
   * libvirt 9.0 default), -1 is libvirt's default, 0 does not wait, >0 is seconds.
   */
  async setAgentResponseTimeout(dom: DomainRef, seconds: number, opts?: CallOptions): Promise<void> {
    const r = await this.remote(RemoteProcedure.DOMAIN_AGENT_SET_RESPONSE_TIMEOUT, (w) => (writeDomain(w, dom), w.int(seconds).uint(0)), opts);
    r.int(); // result, always 0 on success
  }

  /**
   * QEMU_PROC_DOMAIN_AGENT_COMMAND (virDomainQemuAgentCommand): sends one qemu-ga JSON command and
   * returns the reply's `return` member. `timeoutSec` is libvirt's agent timeout (-2/-1/0/>0).
   */
  async qemuAgentCommand(dom: DomainRef, command: string | object, timeoutSec: number, opts?: CallOptions): Promise<unknown> {
    const cmd = typeof command === 'string' ? command : JSON.stringify(command);
    const timeoutMs = opts?.timeoutMs ?? (timeoutSec > 0 ? Math.max(this.callTimeoutMs, timeoutSec * 1000 + AGENT_TIMEOUT_SLACK_MS) : undefined);
    const r = await this.call(
      QEMU_PROGRAM,
      QemuProcedure.DOMAIN_AGENT_COMMAND,
      (w) => (writeDomain(w, dom), w.string(cmd).int(timeoutSec).uint(0)),
      { ...opts, timeoutMs },
    );
    const reply = r.optionalString();
    if (reply === null) return undefined;
    return (JSON.parse(reply) as { return?: unknown }).return;
  }

  /** qemu-ga `guest-ping` through {@link qemuAgentCommand}: resolves when the agent answers. */
  async guestPing(dom: DomainRef, timeoutSec = 5, opts?: CallOptions): Promise<void> {
    await this.qemuAgentCommand(dom, { execute: 'guest-ping' }, timeoutSec, opts);
  }

  /** qemu-ga `guest-fsfreeze-status`: the agent's own view, the ground truth after an ambiguous freeze. */
  async fsFreezeStatus(dom: DomainRef, timeoutSec = 5, opts?: CallOptions): Promise<'thawed' | 'frozen'> {
    const status = await this.qemuAgentCommand(dom, { execute: 'guest-fsfreeze-status' }, timeoutSec, opts);
    if (status !== 'thawed' && status !== 'frozen') {
      throw new LibvirtError({ code: 1, domain: 0, level: 2, message: `unexpected guest-fsfreeze-status reply: ${JSON.stringify(status)}`, procedure: 'QEMU_PROC_DOMAIN_AGENT_COMMAND' });
    }
    return status;
  }

  /**
   * qemu-ga `guest-exec` through {@link qemuAgentCommand}: starts `argv[0]` (qemu-ga searches the
   * agent's PATH) with the rest as its arguments and returns the guest pid at once; the command
   * runs on in the guest. {@link guestExecStatus} says when it has exited. An agent that blocks the
   * command (`--block-rpcs`) or cannot start the program answers with a LibvirtError (code 1).
   */
  async guestExec(dom: DomainRef, argv: readonly string[], timeoutSec: number, opts?: CallOptions & { captureOutput?: boolean }): Promise<number> {
    const [path, ...arg] = argv;
    if (!path) throw new TypeError('guestExec: empty argv');
    const r = (await this.qemuAgentCommand(dom, { execute: 'guest-exec', arguments: { path, arg, 'capture-output': opts?.captureOutput ?? false } }, timeoutSec, opts)) as { pid?: unknown } | undefined;
    if (typeof r?.pid !== 'number') {
      throw new LibvirtError({ code: 1, domain: 0, level: 2, message: `unexpected guest-exec reply: ${JSON.stringify(r)}`, procedure: 'QEMU_PROC_DOMAIN_AGENT_COMMAND' });
    }
    return r.pid;
  }

  /**
   * qemu-ga `guest-exec-status`: whether the process {@link guestExec} started has exited, and how
   * (exit code, or the signal that ended it; output base64-decoded when it was captured). qemu-ga
   * forgets a process once it has reported it exited.
   */
  async guestExecStatus(dom: DomainRef, pid: number, timeoutSec: number, opts?: CallOptions): Promise<GuestExecStatus> {
    const r = (await this.qemuAgentCommand(dom, { execute: 'guest-exec-status', arguments: { pid } }, timeoutSec, opts)) as RawExecStatus | undefined;
    if (typeof r?.exited !== 'boolean') {
      throw new LibvirtError({ code: 1, domain: 0, level: 2, message: `unexpected guest-exec-status reply: ${JSON.stringify(r)}`, procedure: 'QEMU_PROC_DOMAIN_AGENT_COMMAND' });
    }
    const text = (b?: string) => (b === undefined ? undefined : Buffer.from(b, 'base64').toString('utf8'));
    const out = text(r['out-data']);
    const err = text(r['err-data']);
    return {
      exited: r.exited,
      ...(r.exitcode !== undefined ? { exitCode: r.exitcode } : {}),
      ...(r.signal !== undefined ? { signal: r.signal } : {}),
      ...(out !== undefined ? { stdout: out } : {}),
      ...(err !== undefined ? { stderr: err } : {}),
    };
  }

  private remote(procedure: number, encode: Encode | undefined, opts?: CallOptions): Promise<XdrReader> {
    return this.call(REMOTE_PROGRAM, procedure, encode, opts);
  }

  private async call(program: number, procedure: number, encode: Encode | undefined, opts?: CallOptions): Promise<XdrReader> {
    let payload: Buffer | undefined;
    if (encode) {
      const w = new XdrWriter();
      encode(w);
      payload = w.toBuffer();
    }
    const reply = await this.pool.call({ program, procedure, payload, timeoutMs: opts?.timeoutMs ?? this.callTimeoutMs, signal: opts?.signal });
    return new XdrReader(reply);
  }
}

function encodeMountpoints(w: XdrWriter, dom: DomainRef, mountpoints: string[]): void {
  writeDomain(w, dom);
  w.array(mountpoints, (ww, m) => ww.string(m));
  w.uint(0);
}

function dialUnix(path: string): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ path });
    socket.once('connect', () => {
      socket.removeListener('error', reject);
      resolve(socket);
    });
    socket.once('error', reject);
  });
}
