/**
 * The client's connections to one libvirtd. libvirtd reads at most `max_client_requests`
 * (default 5) calls per connection at a time and leaves the next one unread behind them, so calls
 * blocked on a hung guest agent would stall every other call on their connection. The pool sends
 * each call on its least busy connection and opens another when all are full. Dead connections
 * (libvirtd restarted) leave the pool; the next call dials again and re-runs CONNECT_OPEN.
 */
import type { Duplex } from 'node:stream';
import { authenticate } from './auth';
import { LibvirtConnectionError } from './errors';
import { CONNECT_RO, FEATURE_PROGRAM_KEEPALIVE, REMOTE_PROGRAM, RemoteProcedure } from './procedures';
import { Transport, type CallRequest, type Dialer } from './transport';
import { XdrWriter } from './xdr';

export interface ConnectionPoolOptions {
  dial: Dialer;
  /** The URI sent in CONNECT_OPEN. */
  openName: string;
  /** Where `dial` goes, for error messages (the socket path). */
  endpoint: string;
  readOnly: boolean;
  /** Timeout of CONNECT_OPEN / CONNECT_CLOSE (the latter capped at 5 s). */
  callTimeoutMs: number;
  keepaliveIntervalMs?: number;
  maxCallsPerConnection: number;
  maxConnections: number;
}

export class ConnectionPool {
  private readonly live: Transport[] = [];
  /** Connections picked for a call not yet sent; counted so concurrent callers spread out. */
  private readonly claims = new Map<Transport, number>();
  private opening: Promise<Transport> | undefined;
  private closed = false;

  constructor(private readonly options: ConnectionPoolOptions) {}

  /** Sends one call on the least busy connection, dialing first if needed. */
  async call(req: CallRequest): Promise<Buffer> {
    const transport = await this.acquire();
    let reply: Promise<Buffer>;
    try {
      reply = transport.call(req);
    } finally {
      // transport.call registers the call synchronously: from here on inFlight counts it.
      this.release(transport);
    }
    return reply;
  }

  /** Makes sure one connection is open (fails like a call would). */
  async warm(): Promise<void> {
    this.release(await this.acquire());
  }

  /** CONNECT_CLOSE on every connection, then closes them; their pending calls fail. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.opening?.catch(() => undefined);
    await Promise.all(this.live.splice(0).map((t) => this.closeTransport(t)));
  }

  private async acquire(): Promise<Transport> {
    for (;;) {
      if (this.closed) throw new LibvirtConnectionError('libvirt client closed');
      let best: Transport | undefined;
      for (const t of this.live) if (!best || this.load(t) < this.load(best)) best = t;
      if (best && (this.load(best) < this.options.maxCallsPerConnection || this.live.length >= this.options.maxConnections)) {
        this.claims.set(best, (this.claims.get(best) ?? 0) + 1);
        return best;
      }
      // One dial at a time, shared by every caller waiting for a connection.
      this.opening ??= this.open().finally(() => {
        this.opening = undefined;
      });
      await this.opening;
    }
  }

  private load(t: Transport): number {
    return t.inFlight + (this.claims.get(t) ?? 0);
  }

  private release(t: Transport): void {
    const n = (this.claims.get(t) ?? 1) - 1;
    if (n > 0) this.claims.set(t, n);
    else this.claims.delete(t);
  }

  /**
   * Dial, authenticate (REMOTE_PROC_AUTH_LIST and what it names, see auth.ts), REMOTE_PROC_CONNECT_OPEN
   * (virConnectOpen) and, with keepalive, the feature handshake. Every connection authenticates:
   * libvirtd keeps the result per connection.
   */
  private async open(): Promise<Transport> {
    const { dial, openName, endpoint, readOnly, callTimeoutMs: timeoutMs, keepaliveIntervalMs } = this.options;
    let socket: Duplex;
    try {
      socket = await dial();
    } catch (err) {
      throw new LibvirtConnectionError(`cannot connect to libvirtd: ${(err as Error).message}`, { cause: err });
    }
    const t = new Transport(socket, { keepaliveIntervalMs });
    try {
      await authenticate((req) => t.call(req), { socketPath: endpoint, readOnly, timeoutMs });
      const open = new XdrWriter().optionalString(openName).uint(readOnly ? CONNECT_RO : 0);
      await t.call({ program: REMOTE_PROGRAM, procedure: RemoteProcedure.CONNECT_OPEN, payload: open.toBuffer(), timeoutMs });
      if (keepaliveIntervalMs) {
        // Asking about the feature is how libvirtd learns we answer its pings; it then pings us too.
        const feature = new XdrWriter().int(FEATURE_PROGRAM_KEEPALIVE);
        await t.call({ program: REMOTE_PROGRAM, procedure: RemoteProcedure.CONNECT_SUPPORTS_FEATURE, payload: feature.toBuffer(), timeoutMs });
      }
    } catch (err) {
      t.destroy();
      throw err;
    }
    if (this.closed) {
      t.destroy(new LibvirtConnectionError('libvirt client closed'));
      throw new LibvirtConnectionError('libvirt client closed');
    }
    this.live.push(t);
    t.onClose(() => {
      const at = this.live.indexOf(t);
      if (at >= 0) this.live.splice(at, 1);
      this.claims.delete(t);
    });
    return t;
  }

  /** REMOTE_PROC_CONNECT_CLOSE (virConnectClose), best effort: the socket goes away regardless. */
  private async closeTransport(t: Transport): Promise<void> {
    try {
      await t.call({ program: REMOTE_PROGRAM, procedure: RemoteProcedure.CONNECT_CLOSE, timeoutMs: Math.min(this.options.callTimeoutMs, 5_000) });
    } catch {
      // Ignored on purpose: there is nothing left to do with a connection that fails to close.
    } finally {
      t.destroy(new LibvirtConnectionError('libvirt client closed'));
    }
  }
}
