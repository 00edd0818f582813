import { isNotFound, rbdCall } from './errors';
import { native, type NativeHandle } from './native';

/*
 * A librados connection kept open and reused (one per worker): connecting costs ~10 ms and is
 * exactly what a per-call `rbd` process pays inside the freeze window.
 */

export interface ConnectOptions {
  /** Path to ceph.conf. */
  conf: string;
  /** cephx client id without "client." (default "admin"). */
  id?: string;
  /** Keyring path; overrides the conf file's `keyring`. */
  keyring?: string;
  /** client_mount_timeout: how long rados_connect may wait for the monitors. */
  connectTimeoutSec?: number;
}

/** A pool (and optional rbd namespace) I/O context: rados_ioctx_t. */
export class IoCtx {
  private closing: Promise<void> | undefined;

  /** @internal */
  constructor(
    /** @internal */ readonly handle: NativeHandle,
    readonly pool: string,
    readonly namespace: string,
  ) {}

  /** rados_ioctx_destroy. Idempotent. Images opened through it stay usable. */
  close(): Promise<void> {
    this.closing ??= rbdCall(() => native().ioctxDestroy(this.handle));
    return this.closing;
  }
}

export class RadosCluster {
  private closing: Promise<void> | undefined;

  private constructor(/** @internal */ readonly handle: NativeHandle) {}

  /** rados_create + rados_conf_read_file + rados_conf_set + rados_connect. */
  static async connect(o: ConnectOptions): Promise<RadosCluster> {
    const handle = await rbdCall(() =>
      native().connect(o.conf, o.id ?? 'admin', o.keyring, o.connectTimeoutSec),
    );
    return new RadosCluster(handle);
  }

  /** rados_cluster_fsid. */
  fsid(): Promise<string> {
    return rbdCall(() => native().fsid(this.handle));
  }

  /** rados_ioctx_create (+ rados_ioctx_set_namespace). ENOENT when the pool does not exist. */
  async openIoCtx(pool: string, namespace = ''): Promise<IoCtx> {
    const handle = await rbdCall(() => native().ioctxCreate(this.handle, pool, namespace));
    return new IoCtx(handle, pool, namespace);
  }

  /** rados_pool_lookup. */
  async poolExists(pool: string): Promise<boolean> {
    try {
      await rbdCall(() => native().poolLookup(this.handle, pool));
      return true;
    } catch (e) {
      if (isNotFound(e)) return false;
      throw e;
    }
  }

  /** rados_getaddrs: this session's client address(es), the form addToBlocklist takes. */
  addrs(): Promise<string> {
    return rbdCall(() => native().getAddrs(this.handle));
  }

  /**
   * rados_blocklist_add: fences a client session from the OSDs (its watches and locks go).
   * Only for sessions known dead (e.g. a SIGKILLed snapshotter child); needs mon caps for
   * `osd blocklist` (profile rbd has them).
   */
  addToBlocklist(addr: string, expireSec = 3600): Promise<void> {
    return rbdCall(() => native().blocklistAdd(this.handle, addr, expireSec));
  }

  /**
   * rados_shutdown. Idempotent once it succeeded. Fails EBUSY while IoCtx or Image handles
   * from this cluster are open: close them first (dependency order).
   */
  shutdown(): Promise<void> {
    this.closing ??= rbdCall(() => native().shutdown(this.handle)).catch((e: unknown) => {
      this.closing = undefined;
      throw e;
    });
    return this.closing;
  }
}
