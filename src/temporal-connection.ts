import { readFileSync } from 'node:fs';
import type { Config } from './config';
import { temporalSecrets } from './config';

/**
 * Connection options shared by clients and workers: address, TLS/mTLS, API key, gRPC metadata.
 * Files named in config are read here, at connect time; inline key material from the Temporal
 * conventions (TEMPORAL_API_KEY, *_DATA, a profile) comes from {@link temporalSecrets}.
 */
export function connectionOptions(config: Config) {
  const t = config.temporal;
  const s = temporalSecrets(config);
  const file = (p: string | undefined) => (p ? readFileSync(p) : undefined);
  const bytes = (d: string | undefined) => (d === undefined ? undefined : Buffer.from(d));
  let tls;
  if (t.tls === false) tls = false as const;
  else if (t.tls) {
    const crt = bytes(s.certData) ?? file(t.tls.certPath);
    const key = bytes(s.keyData) ?? file(t.tls.keyPath);
    tls = {
      serverNameOverride: t.tls.serverName,
      serverRootCACertificate: bytes(s.caData) ?? file(t.tls.caPath),
      clientCertPair: crt && key ? { crt, key } : undefined,
    };
  }
  const apiKey = s.apiKey ?? (t.apiKeyPath ? readFileSync(t.apiKeyPath, 'utf8').trim() : undefined);
  return {
    address: t.address,
    ...(tls !== undefined ? { tls } : {}),
    // An API key switches TLS on unless it was switched off explicitly, as envconfig does.
    ...(apiKey ? { apiKey, tls: tls ?? true } : {}),
    ...(s.grpcMeta ? { metadata: s.grpcMeta } : {}),
  };
}
