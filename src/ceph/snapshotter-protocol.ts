import type { ConnectOptions } from './cluster';

/* Messages between Snapshotter (parent) and snapshotter-child over the fork IPC channel. */

export interface SnapRequest {
  pool: string;
  namespace?: string;
  image: string;
  snap: string;
}

/**
 * `snap` is ignored by open, ping, mirror-snap (librbd names mirror snapshots), mirror-state and
 * the setup ops: exclusive-lock (enable the feature when missing), mirror-enable (snapshot mode)
 * and mirror-disable.
 */
export type SnapOp =
  | 'create' | 'remove' | 'exists' | 'open' | 'ping' | 'mirror-snap' | 'mirror-state'
  | 'exclusive-lock' | 'mirror-enable' | 'mirror-disable';

/** An image's mirroring as the 'mirror-state' op reads it; `mode` only when it is enabled. */
export interface MirrorState {
  state: 'disabling' | 'enabled' | 'disabled';
  primary: boolean;
  mode?: 'snapshot' | 'journal';
}

/** exists: boolean; mirror-snap: the snapshot's id; mirror-state: a MirrorState; exclusive-lock: whether it was added. */
export type ReplyValue = boolean | number | MirrorState;

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
  | { type: 'result'; id: number; ok: true; value?: ReplyValue }
  | { type: 'result'; id: number; ok: false; error: WireError };
