import { accessSync, constants, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { HOST_ID, RBD_NAME } from './model/input';
import { PRE_FLUSH_TIMEOUT_MS } from './model/pre-flush';
import { LOG_LEVELS } from './worker/logger';
import { mergeLayers, temporalEnvLayer, temporalTomlLayer, vmsnapEnvLayer } from './temporal-settings';
import type { Secret, TemporalLayer } from './temporal-settings';

/*
 * Configuration from flags, then environment, then an optional JSON config file, then defaults —
 * in that precedence; Temporal's settings also from the Temporal conventions (TEMPORAL_* variables,
 * temporal.toml profiles), in the order temporal-settings.ts gives. Secrets never travel in config
 * values: only paths to keyrings and keys. Key material the conventions carry inline
 * (TEMPORAL_API_KEY, *_DATA, a profile's api_key) is kept beside the config ({@link temporalSecrets}).
 */

const filePath = z
  .string()
  .min(1)
  .max(4096)
  .refine((p) => !p.includes('\0'), 'path contains NUL');

export const ConfigSchema = z.strictObject({
  temporal: z.strictObject({
    address: z.string().regex(/^[A-Za-z0-9.-]+:\d{1,5}$/, 'temporal.address must be host:port').default('127.0.0.1:7233'),
    namespace: z.string().regex(/^[A-Za-z0-9._-]{1,255}$/, 'temporal.namespace has invalid characters').default('default'),
    /** false: TLS off, even with an API key (TEMPORAL_TLS=false); an object: on, with these files. */
    tls: z
      .union([
        z.literal(false),
        z.strictObject({
          caPath: filePath.optional(),
          certPath: filePath.optional(),
          keyPath: filePath.optional(),
          serverName: z.string().max(255).optional(),
        }),
      ])
      .optional(),
    /** Path to a file holding a Temporal Cloud API key (never the key itself). */
    apiKeyPath: filePath.optional(),
  }),
  libvirt: z.strictObject({
    uri: z.string().min(1).max(4096).default('qemu:///system'),
    /** For inspection; default: `uri` on libvirtd's read-only socket (`libvirt-sock-ro` beside the read-write one). */
    readOnlyUri: z.string().min(1).max(4096).optional(),
    /**
     * libvirtd's QEMU status directory (`<domain>.xml` with `<agentTimeout>`): the only place the
     * domain's current agent response timeout can be read, so a freeze can restore it afterwards.
     */
    statusDir: filePath.default('/run/libvirt/qemu'),
  }),
  ceph: z.strictObject({
    conf: filePath.default('/etc/ceph/ceph.conf'),
    id: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'ceph.id must be a cephx client id without "client."').default('vmsnap'),
    keyring: filePath.optional(),
  }),
  /**
   * The DR site (docs/dr.md): the cluster rbd-mirror copies this host's mirrored images to. Read
   * only, by runs in DR mode (target.mirror), to see their mirror snapshots arrive; absent: this
   * host refuses DR runs (MirrorUnavailable).
   */
  drCeph: z
    .strictObject({
      conf: filePath,
      id: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'drCeph.id must be a cephx client id without "client."').default('vmsnap'),
      keyring: filePath.optional(),
    })
    .optional(),
  host: z.string().regex(HOST_ID, 'host must be a simple host id').default(os.hostname().split('.')[0] || 'localhost'),
  imagePool: z.string().regex(RBD_NAME).default('images'),
  stateDir: filePath.default('/var/lib/vmsnap'),
  /** The fleet's restore-record key (the same file on every host, mode 0600): restore records are signed and checked with it. */
  restoreKeyFile: filePath.default('/etc/vmsnap/restore.key'),
  metricsPort: z.number().int().min(0).max(65535).default(9464),
  /**
   * Where /metrics and /healthz listen: an IPv4 or IPv6 address or a hostname (`0.0.0.0` or `::`
   * for every interface). Default: loopback only, for a local agent or a proxy to scrape.
   */
  metricsAddress: z
    .union([z.ipv4(), z.ipv6(), z.string().regex(/^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/)], {
      error: 'must be an IP address or a hostname',
    })
    .default('127.0.0.1'),
  /** The worker's log lines less severe than this are dropped, the Temporal SDK's included. */
  logLevel: z.enum(LOG_LEVELS, { error: `must be one of ${LOG_LEVELS.join(', ')}` }).default('info'),
  /**
   * Before each freeze the guest is asked to write back its dirty data (this command through the
   * agent's guest-exec), so the freeze has only what was dirtied since; waited for at most
   * preFlushTimeoutMs (0: no pre-flush). Never fails a run (docs/safety.md#the-pre-flush).
   */
  preFlushTimeoutMs: z.number().int().min(0).max(10_000).default(PRE_FLUSH_TIMEOUT_MS),
  preFlushCommand: z.array(z.string().min(1).max(4096).refine((a) => !a.includes('\0'), 'contains NUL')).min(1).max(64).default(['sync']),
  /** Clone/flatten/finalize activities at a time on this host (the bulk queue); see README "Bulk slots". */
  bulkConcurrency: z.number().int().min(1).max(64).default(2),
  /** Snapshotter children kept open at most, idle ones closed first (src/ceph/snapshotter-pool.ts). */
  snapshotterLanes: z.number().int().min(1).max(256).default(8),
  sweepIntervalMs: z.number().int().min(500).max(3600_000).default(5000),
  /** At most this many guests frozen at once by vmsnap on this host (held through Temporal, not in memory). */
  maxWindowsPerHost: z.number().int().min(1).max(64).default(4),
  /** At most this many vmsnap freeze windows (each takes the snapshots) at once per Ceph cluster. */
  maxSnapshotsPerCluster: z.number().int().min(1).max(1024).default(16),
  /** How often this host announces itself (and its running VMs) to the fleet registry. */
  fleetBeatMs: z.number().int().min(500).max(600_000).default(10_000),
  /**
   * How long a host must be silent before the fleet calls it lost and ends its routed runs (three
   * times as long after it said it is stopping: a maintenance restart is not a death). A worker
   * restart inside it loses no run: Temporal resumes them.
   */
  fleetHostLostAfterMs: z.number().int().min(3000).max(24 * 3600_000).default(600_000),
  /**
   * How far two hosts' wall clocks may disagree (NTP). A freeze that travelled with its guest is
   * ended by the host it runs on no earlier than its deadline plus this.
   */
  clockSkewMs: z.number().int().min(0).max(600_000).default(1000),
  /**
   * Memory this host keeps for itself (hypervisor, Ceph client, page cache it needs), as Nova's
   * reserved_host_memory_mb: a new VM (restore --as, a verify copy) is placed here only when the
   * host's available memory minus this still holds the VM's.
   */
  memoryReserveMiB: z.number().int().min(0).max(16 * 1024 * 1024).default(512),
  /** How often the worker looks for leftovers of runs that ended uncompensated (terminated). */
  reapIntervalMs: z.number().int().min(500).max(24 * 3600_000).default(60_000),
  /**
   * Recorded on everything the worker makes, with the namespace; the reaper and retention act only
   * on their own fleet's. Default: the Temporal namespace's id (a UUID per namespace registration).
   */
  fleetId: z.string().regex(/^[A-Za-z0-9._:-]{1,128}$/, 'fleetId: letters, digits, . _ : - (1-128)').optional(),
  /** How long the reaper keeps the owner record of an absent snapshot, for one that lands late. */
  ownerRecordHorizonMs: z.number().int().min(1000).max(30 * 24 * 3600_000).default(3600_000),
  /** How long the reaper keeps a disk a completed in-place restore replaced (`vmsnap restore --confirm` removes it sooner). */
  keepReplacedMs: z.number().int().min(0).max(365 * 24 * 3600_000).default(24 * 3600_000),
});

export type Config = z.infer<typeof ConfigSchema>;
type DeepPartial<T> = { [K in keyof T]?: T[K] extends object ? DeepPartial<T[K]> : T[K] };
export type ConfigOverrides = DeepPartial<Config>;

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Where inspection connects read-only: `libvirt.readOnlyUri`, else `libvirt.uri` (its `-ro` socket). */
export function readOnlyLibvirtUri(config: Config): string {
  return config.libvirt.readOnlyUri ?? config.libvirt.uri;
}

/** Task queue of one hypervisor host: workflows and activities that touch its libvirt run there. */
export function hostTaskQueue(host: string): string {
  return `vmsnap-${host}`;
}

/** Everything but Temporal's settings (those: {@link resolveTemporal}). */
export function fromEnv(env: NodeJS.ProcessEnv): ConfigOverrides {
  const num = (v?: string) => (v === undefined || v === '' ? undefined : Number(v));
  return prune({
    libvirt: { uri: env.VMSNAP_LIBVIRT_URI ?? env.LIBVIRT_DEFAULT_URI, readOnlyUri: env.VMSNAP_LIBVIRT_RO_URI, statusDir: env.VMSNAP_LIBVIRT_STATUS_DIR },
    ceph: {
      conf: env.VMSNAP_CEPH_CONF ?? env.CEPH_CONF,
      id: env.VMSNAP_CEPH_ID,
      keyring: env.VMSNAP_CEPH_KEYRING,
    },
    drCeph: { conf: env.VMSNAP_DR_CEPH_CONF, id: env.VMSNAP_DR_CEPH_ID, keyring: env.VMSNAP_DR_CEPH_KEYRING },
    host: env.VMSNAP_HOST,
    imagePool: env.VMSNAP_IMAGE_POOL,
    stateDir: env.VMSNAP_STATE_DIR,
    restoreKeyFile: env.VMSNAP_RESTORE_KEY_FILE,
    metricsPort: num(env.VMSNAP_METRICS_PORT),
    metricsAddress: env.VMSNAP_METRICS_ADDRESS,
    logLevel: env.VMSNAP_LOG_LEVEL,
    preFlushTimeoutMs: num(env.VMSNAP_PRE_FLUSH_TIMEOUT_MS),
    preFlushCommand: words(env.VMSNAP_PRE_FLUSH_COMMAND),
    bulkConcurrency: num(env.VMSNAP_BULK_CONCURRENCY),
    snapshotterLanes: num(env.VMSNAP_SNAPSHOTTER_LANES),
    sweepIntervalMs: num(env.VMSNAP_SWEEP_INTERVAL_MS),
    fleetBeatMs: num(env.VMSNAP_FLEET_BEAT_MS),
    fleetHostLostAfterMs: num(env.VMSNAP_FLEET_HOST_LOST_AFTER_MS),
    clockSkewMs: num(env.VMSNAP_CLOCK_SKEW_MS),
    maxWindowsPerHost: num(env.VMSNAP_MAX_WINDOWS_PER_HOST),
    maxSnapshotsPerCluster: num(env.VMSNAP_MAX_SNAPSHOTS_PER_CLUSTER),
    memoryReserveMiB: num(env.VMSNAP_MEMORY_RESERVE_MIB),
    reapIntervalMs: num(env.VMSNAP_REAP_INTERVAL_MS),
    fleetId: env.VMSNAP_FLEET_ID,
    ownerRecordHorizonMs: num(env.VMSNAP_OWNER_RECORD_HORIZON_MS),
    keepReplacedMs: num(env.VMSNAP_KEEP_REPLACED_MS),
  }) as ConfigOverrides;
}

/** A command line from the environment, split on whitespace (no shell, no quoting). */
function words(v: string | undefined): string[] | undefined {
  const w = v?.trim().split(/\s+/).filter(Boolean);
  return w?.length ? w : undefined;
}

export function fromFile(file: string | undefined): ConfigOverrides {
  if (!file) return {};
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read config file ${file}: ${(err as Error).message}`);
  }
  try {
    return JSON.parse(text) as ConfigOverrides;
  } catch (err) {
    throw new ConfigError(`config file ${file} is not valid JSON: ${(err as Error).message}`);
  }
}

/** Inline key material from the Temporal conventions, read by temporal-connection.ts; never in Config. */
export interface TemporalSecrets {
  caData?: string;
  certData?: string;
  keyData?: string;
  apiKey?: string;
  grpcMeta?: Record<string, string>;
}

// Keyed by the config's temporal section, so a copy of the config that keeps the section keeps them.
const secrets = new WeakMap<object, TemporalSecrets>();

export function temporalSecrets(config: Config): TemporalSecrets {
  return secrets.get(config.temporal) ?? {};
}

type TemporalOverrides = NonNullable<ConfigOverrides['temporal']>;

function fileLayer(t: TemporalOverrides | undefined): TemporalLayer {
  if (!t) return {};
  const tls = t.tls as Config['temporal']['tls'] | undefined;
  const path = (v: string | undefined) => (v ? { path: v } : undefined);
  return {
    address: t.address,
    namespace: t.namespace,
    tls: tls === undefined ? undefined : tls !== false,
    serverName: tls ? tls.serverName : undefined,
    ca: path(tls ? tls.caPath : undefined),
    cert: path(tls ? tls.certPath : undefined),
    key: path(tls ? tls.keyPath : undefined),
    apiKey: path(t.apiKeyPath),
  };
}

/**
 * Temporal's settings from every source, highest first (see temporal-settings.ts): the section of
 * Config, with paths only, and the inline secrets beside it.
 */
export function resolveTemporal(
  flags: TemporalOverrides | undefined,
  env: NodeJS.ProcessEnv,
  file: TemporalOverrides | undefined,
): { temporal: Record<string, unknown>; secrets: TemporalSecrets } {
  let conventions: TemporalLayer, profile: TemporalLayer;
  try {
    conventions = temporalEnvLayer(env);
    profile = temporalTomlLayer(env, readable);
  } catch (err) {
    throw new ConfigError(`invalid Temporal client configuration (TEMPORAL_* / temporal.toml): ${(err as Error).message}`);
  }
  const t = mergeLayers([{ address: flags?.address, namespace: flags?.namespace }, vmsnapEnvLayer(env), conventions, fileLayer(file), profile]);
  // Half a client pair would be dropped silently and the server would refuse "no certificate".
  if (!t.cert !== !t.key) throw new ConfigError('invalid configuration: temporal.tls: certPath and keyPath go together (mTLS client pair)');
  const pathOf = (x: Secret | undefined) => (x && 'path' in x ? x.path : undefined);
  const dataOf = (x: Secret | undefined) => (x && 'data' in x ? x.data : undefined);
  const tlsOn = t.tls ?? (t.serverName || t.ca || t.cert || t.key ? true : undefined);
  const tls = tlsOn === false ? false : tlsOn ? { caPath: pathOf(t.ca), certPath: pathOf(t.cert), keyPath: pathOf(t.key), serverName: t.serverName } : undefined;
  return {
    temporal: { address: t.address, namespace: t.namespace, tls: tls === false ? false : tls && prune(tls), apiKeyPath: pathOf(t.apiKey) },
    secrets: prune({ caData: dataOf(t.ca), certData: dataOf(t.cert), keyData: dataOf(t.key), apiKey: dataOf(t.apiKey), grpcMeta: t.grpcMeta }),
  };
}

function readable(file: string): boolean {
  try {
    accessSync(file, constants.R_OK);
    return true;
  } catch {
    return false;
  }
}

/** flags > env > file > defaults (Temporal's settings: {@link resolveTemporal}). */
export function loadConfig(flags: ConfigOverrides = {}, env: NodeJS.ProcessEnv = process.env, file = env.VMSNAP_CONFIG): Config {
  const fromConfigFile = fromFile(file);
  // The file's temporal section is read field by field below: check it whole first, as strictly as the rest.
  const fileTemporal = ConfigSchema.shape.temporal.safeParse(fromConfigFile.temporal ?? {});
  if (!fileTemporal.success) {
    throw new ConfigError(`invalid configuration in ${file}: ` + fileTemporal.error.issues.map((i) => `temporal.${i.path.join('.')}: ${i.message}`).join('; '));
  }
  const { temporal, secrets: inline } = resolveTemporal(flags.temporal, env, fromConfigFile.temporal);
  const rest = (o: ConfigOverrides) => ({ ...o, temporal: {} });
  const merged = merge(merge(merge({ temporal: {}, libvirt: {}, ceph: {} }, rest(fromConfigFile)), rest(fromEnv(env))), prune(rest(flags)));
  // An empty tls object means "TLS on, system roots" (TEMPORAL_TLS=true): prune must not drop it.
  merged.temporal = { ...prune({ ...temporal, tls: undefined }), ...(temporal.tls !== undefined ? { tls: temporal.tls } : {}) };
  const r = ConfigSchema.safeParse(merged);
  if (!r.success) {
    throw new ConfigError(
      'invalid configuration: ' + r.error.issues.map((i) => `${i.path.join('.') || 'config'}: ${i.message}`).join('; '),
    );
  }
  const c = r.data;
  c.stateDir = path.resolve(c.stateDir);
  secrets.set(c.temporal, inline);
  return c;
}

function prune<T>(v: T): T {
  if (v && typeof v === 'object' && !Array.isArray(v)) {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) {
      const p = prune(x);
      if (p !== undefined && !(typeof p === 'object' && p !== null && Object.keys(p).length === 0)) out[k] = p;
    }
    return out as T;
  }
  return v;
}

function merge(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b ?? {})) {
    out[k] = v && typeof v === 'object' && !Array.isArray(v) && typeof out[k] === 'object' ? merge(out[k] as Record<string, unknown>, v as Record<string, unknown>) : v;
  }
  return out;
}
