import type { ConnectOptions } from './cluster';

/* Messages between Snapshotter (parent) and snapshotter-child over the fork IPC channel. */

export interface SnapRequest {
  pool: string;
  namespace?: string;
  image: string;
  snap: string;
  /** Image metadata ops only: the key (meta-set, meta-remove; the prefix for meta-keys) and, for meta-set, the value. */
  meta?: { key: string; value?: string };
}

/**
 * `snap` is ignored by open, ping, mirror-snap (librbd names mirror snapshots), mirror-state, the
 * setup ops: exclusive-lock (enable the feature when missing), mirror-enable (snapshot mode) and
 * mirror-disable, and the image metadata ops: meta-set, meta-remove, meta-keys (the keys under a
 * prefix) and user-snaps (the names of the image's user snapshots).
 */
export type SnapOp =
  | 'create' | 'remove' | 'exists' | 'open' | 'ping' | 'mirror-snap' | 'mirror-state'
  | 'exclusive-lock' | 'mirror-enable' | 'mirror-disable'
  | 'meta-set' | 'meta-remove' | 'meta-keys' | 'user-snaps';

/** An image's mirroring as the 'mirror-state' op reads it; `mode` only when it is enabled. */
export interface MirrorState {
  state: 'disabling' | 'enabled' | 'disabled';
  primary: boolean;
  mode?: 'snapshot' | 'journal';
}

/**
 * exists: boolean; mirror-snap: the snapshot's id; mirror-state: a MirrorState; exclusive-lock:
 * whether it was added; meta-keys, user-snaps: names.
 */
export type ReplyValue = boolean | number | MirrorState | string[];

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
