import { loadClientConfigProfile } from '@temporalio/envconfig';
import type { ClientConfigProfile, ConfigDataSource } from '@temporalio/envconfig';

/*
 * Where vmsnap's Temporal settings come from, highest first:
 *   1. flags (--temporal-address, --namespace)
 *   2. VMSNAP_TEMPORAL_* environment variables
 *   3. the Temporal conventions' environment variables (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
 *      TEMPORAL_API_KEY, TEMPORAL_TLS, TEMPORAL_TLS_*, TEMPORAL_GRPC_META_*), read by @temporalio/envconfig
 *   4. the vmsnap config file (--config / VMSNAP_CONFIG), its "temporal" section
 *   5. the temporal.toml profile (TEMPORAL_PROFILE, default "default") of TEMPORAL_CONFIG_FILE or
 *      $XDG_CONFIG_HOME/temporalio/temporal.toml (~/.config/...), read by @temporalio/envconfig
 *   6. defaults (127.0.0.1:7233, namespace "default", no TLS)
 * Each setting is taken from the highest source that has it. The conventions' variables sit
 * under vmsnap's own, so a host that sets both for other Temporal tools keeps vmsnap's.
 */

/** A file to read at connect time, or the bytes themselves (inline in a variable or a profile). */
export type Secret = { path: string } | { data: string };

/** One source's Temporal settings; every field optional, the highest source that has it wins. */
export interface TemporalLayer {
  address?: string;
  namespace?: string;
  /** An explicit on/off (TEMPORAL_TLS, a profile's tls.disabled); otherwise TLS follows what is set. */
  tls?: boolean;
  serverName?: string;
  ca?: Secret;
  cert?: Secret;
  key?: Secret;
  apiKey?: Secret;
  grpcMeta?: Record<string, string>;
}

const source = (s: ConfigDataSource | undefined): Secret | undefined =>
  s === undefined ? undefined : 'path' in s ? { path: s.path } : { data: typeof s.data === 'string' ? s.data : Buffer.from(s.data).toString('utf8') };

function fromProfile(p: ClientConfigProfile): TemporalLayer {
  return {
    address: p.address,
    namespace: p.namespace,
    tls: p.tls === undefined ? undefined : p.tls.disabled === true ? false : p.tls.disabled === false ? true : undefined,
    serverName: p.tls?.serverName,
    ca: source(p.tls?.serverCACert),
    cert: source(p.tls?.clientCert),
    key: source(p.tls?.clientKey),
    apiKey: p.apiKey === undefined ? undefined : { data: p.apiKey },
    grpcMeta: p.grpcMeta && Object.keys(p.grpcMeta).length ? p.grpcMeta : undefined,
  };
}

/** TEMPORAL_* variables alone, as every Temporal SDK and the `temporal` CLI read them. */
export function temporalEnvLayer(env: NodeJS.ProcessEnv): TemporalLayer {
  return fromProfile(loadClientConfigProfile({ disableFile: true, overrideEnvVars: env as Record<string, string> }));
}

/**
 * The temporal.toml profile alone. A profile named in TEMPORAL_PROFILE must exist, and a file named
 * in TEMPORAL_CONFIG_FILE must be readable: either is a mistake to report, not a default to fall to.
 */
export function temporalTomlLayer(env: NodeJS.ProcessEnv, readable: (file: string) => boolean): TemporalLayer {
  if (env.TEMPORAL_CONFIG_FILE && !readable(env.TEMPORAL_CONFIG_FILE)) {
    throw new Error(`TEMPORAL_CONFIG_FILE ${env.TEMPORAL_CONFIG_FILE} cannot be read`);
  }
  return fromProfile(loadClientConfigProfile({ disableEnv: true, overrideEnvVars: env as Record<string, string> }));
}

/** VMSNAP_TEMPORAL_* variables: paths only, never key material. */
export function vmsnapEnvLayer(env: NodeJS.ProcessEnv): TemporalLayer {
  const path = (v: string | undefined) => (v ? { path: v } : undefined);
  const anyTls = env.VMSNAP_TEMPORAL_TLS_CA || env.VMSNAP_TEMPORAL_TLS_CERT || env.VMSNAP_TEMPORAL_TLS_KEY || env.VMSNAP_TEMPORAL_TLS_SERVER_NAME;
  return {
    address: env.VMSNAP_TEMPORAL_ADDRESS || undefined,
    namespace: env.VMSNAP_TEMPORAL_NAMESPACE || undefined,
    tls: anyTls ? true : undefined,
    serverName: env.VMSNAP_TEMPORAL_TLS_SERVER_NAME || undefined,
    ca: path(env.VMSNAP_TEMPORAL_TLS_CA),
    cert: path(env.VMSNAP_TEMPORAL_TLS_CERT),
    key: path(env.VMSNAP_TEMPORAL_TLS_KEY),
    apiKey: path(env.VMSNAP_TEMPORAL_API_KEY_FILE),
  };
}

/** Field by field, the first layer that has a value. */
export function mergeLayers(layers: TemporalLayer[]): TemporalLayer {
  const out: TemporalLayer = {};
  for (const layer of [...layers].reverse()) {
    for (const [k, v] of Object.entries(layer)) {
      if (v === undefined) continue;
      if (k === 'grpcMeta') out.grpcMeta = { ...out.grpcMeta, ...(v as Record<string, string>) };
      else (out as Record<string, unknown>)[k] = v;
    }
  }
  return out;
}
