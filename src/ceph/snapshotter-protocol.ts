import type { ConnectOptions } from './cluster';

/* Messages between Snapshotter (parent) and snapshotter-child over the fork IPC channel. */

export interface SnapRequest {
  pool: string;
  namespace?: string;
  image: string;
  snap: string;
}

export type SnapOp = 'create' | 'remove' | 'exists' | 'open' | 'ping';

export type ToChild =
  | { type: 'init'; options: ConnectOptions; idleCloseMs: number }
  | { type: 'request'; id: number; op: SnapOp; req: SnapRequest };

export interface WireError {
  errno: number;
  call: string;
  message: string;
}

export type FromChild =
  | { type: 'ready'; addrs: string }
  | { type: 'fatal'; error: WireError }
  | { type: 'result'; id: number; ok: true; value?: boolean }
  | { type: 'result'; id: number; ok: false; error: WireError };
