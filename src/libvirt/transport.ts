/**
 * One connection to libvirtd: writes calls, matches replies to calls by serial number, answers
 * keepalive pings. Many calls can be in flight at once; libvirtd answers them in any order.
 * All I/O is non-blocking socket I/O on the event loop, so a call that libvirtd holds (e.g. on a
 * hung guest agent) costs one map entry and one timer, never a thread.
 */
import type { Duplex } from 'node:stream';
import { decodeRemoteError, LibvirtConnectionError, LibvirtTimeoutError } from './errors';
import { encodeFrame, FrameSplitter, MessageStatus, MessageType, type Frame } from './packet';
import { KEEPALIVE_PROGRAM, KeepaliveProcedure, PROTOCOL_VERSION, procedureName } from './procedures';
import { XdrReader } from './xdr';

/** Opens the byte stream to libvirtd. The seam that lets unit tests replay recorded bytes. */
export type Dialer = () => Promise<Duplex>;

export interface TransportOptions {
  /** Send our own PING this often and drop the connection after `keepaliveCount` silent intervals. */
  keepaliveIntervalMs?: number;
  keepaliveCount?: number;
}

export interface CallRequest {
  program: number;
  procedure: number;
  payload?: Buffer;
  timeoutMs: number;
  signal?: AbortSignal;
}

interface Pending {
  resolve: (payload: Buffer) => void;
  reject: (err: Error) => void;
  name: string;
  cleanup: () => void;
}

type CloseListener = (err: Error) => void;

export class Transport {
  private nextSerial = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly splitter = new FrameSplitter();
  private readonly closeListeners: CloseListener[] = [];
  private closeError: Error | undefined;
  private keepaliveTimer: NodeJS.Timeout | undefined;
  private lastReceived = Date.now();

  constructor(
    private readonly socket: Duplex,
    options: TransportOptions = {},
  ) {
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (err: Error) => this.destroy(new LibvirtConnectionError(`libvirt socket error: ${err.message}`, { cause: err })));
    socket.on('close', () => this.destroy(new LibvirtConnectionError('libvirt connection closed')));
    socket.on('end', () => this.destroy(new LibvirtConnectionError('libvirtd closed the connection')));
    const interval = options.keepaliveIntervalMs ?? 0;
    if (interval > 0) this.startKeepalive(interval, options.keepaliveCount ?? 5);
    this.updateRef();
  }

  get closed(): boolean {
    return this.closeError !== undefined;
  }

  /** Calls sent and not yet answered, timed out or aborted. */
  get inFlight(): number {
    return this.pending.size;
  }

  onClose(listener: CloseListener): void {
    if (this.closeError) listener(this.closeError);
    else this.closeListeners.push(listener);
  }

  /** Sends one call and resolves with its reply payload; an error reply rejects with LibvirtError. */
  call(req: CallRequest): Promise<Buffer> {
    const name = procedureName(req.program, req.procedure);
    if (this.closeError) return Promise.reject(this.closeError);
    if (req.signal?.aborted) return Promise.reject(abortReason(req.signal));
    const serial = this.nextSerial;
    this.nextSerial = (this.nextSerial + 1) >>> 0 || 1;
    return new Promise<Buffer>((resolve, reject) => {
      const timer = setTimeout(() => {
        // Dropping the entry makes a late reply land on an unknown serial and be ignored.
        this.settle(serial)?.reject(new LibvirtTimeoutError(name, req.timeoutMs));
      }, req.timeoutMs);
      const onAbort = (): void => this.settle(serial)?.reject(abortReason(req.signal!));
      req.signal?.addEventListener('abort', onAbort, { once: true });
      const cleanup = (): void => {
        clearTimeout(timer);
        req.signal?.removeEventListener('abort', onAbort);
      };
      this.pending.set(serial, { resolve, reject, name, cleanup });
      this.updateRef();
      this.send(
        { program: req.program, version: PROTOCOL_VERSION, procedure: req.procedure, type: MessageType.Call, serial, status: MessageStatus.Ok },
        req.payload,
      );
    });
  }

  /** Fails every pending call with `err` and closes the socket. Idempotent. */
  destroy(err: Error = new LibvirtConnectionError('libvirt connection closed')): void {
    if (this.closeError) return;
    this.closeError = err;
    clearInterval(this.keepaliveTimer);
    for (const serial of [...this.pending.keys()]) this.settle(serial)?.reject(err);
    this.socket.destroy();
    for (const listener of this.closeListeners.splice(0)) listener(err);
  }

  private send(header: Frame['header'], payload?: Buffer): void {
    this.socket.write(encodeFrame(header, payload));
  }

  private settle(serial: number): Pending | undefined {
    const entry = this.pending.get(serial);
    if (!entry) return undefined;
    this.pending.delete(serial);
    entry.cleanup();
    this.updateRef();
    return entry;
  }

  private onData(chunk: Buffer): void {
    this.lastReceived = Date.now();
    let frames: Frame[];
    try {
      frames = this.splitter.push(chunk);
    } catch (err) {
      this.destroy(new LibvirtConnectionError(`corrupt frame from libvirtd: ${(err as Error).message}`, { cause: err }));
      return;
    }
    for (const frame of frames) this.onFrame(frame);
  }

  private onFrame({ header, payload }: Frame): void {
    if (header.program === KEEPALIVE_PROGRAM) {
      if (header.procedure === KeepaliveProcedure.PING) this.sendKeepalive(KeepaliveProcedure.PONG);
      return;
    }
    // Events (MESSAGE) and streams are never requested by this client.
    if (header.type !== MessageType.Reply) return;
    const entry = this.settle(header.serial);
    if (!entry) return;
    if (header.status === MessageStatus.Ok) {
      entry.resolve(payload);
      return;
    }
    try {
      entry.reject(decodeRemoteError(new XdrReader(payload), entry.name));
    } catch (err) {
      entry.reject(new LibvirtConnectionError(`${entry.name}: undecodable error reply: ${(err as Error).message}`, { cause: err }));
    }
  }

  private sendKeepalive(procedure: number): void {
    if (this.closeError) return;
    this.send({ program: KEEPALIVE_PROGRAM, version: PROTOCOL_VERSION, procedure, type: MessageType.Message, serial: 0, status: MessageStatus.Ok });
  }

  private startKeepalive(intervalMs: number, count: number): void {
    this.keepaliveTimer = setInterval(() => {
      if (Date.now() - this.lastReceived > intervalMs * count) {
        this.destroy(new LibvirtConnectionError(`libvirtd silent for ${count} keepalive intervals of ${intervalMs} ms`));
        return;
      }
      this.sendKeepalive(KeepaliveProcedure.PING);
    }, intervalMs);
    this.keepaliveTimer.unref();
  }

  /** An idle connection must not keep the process alive; one with calls in flight must. */
  private updateRef(): void {
    const s = this.socket as Duplex & { ref?: () => void; unref?: () => void };
    if (this.pending.size > 0) s.ref?.();
    else s.unref?.();
  }
}

function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error('libvirt call aborted', { cause: signal.reason });
}
