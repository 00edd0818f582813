import { readFileSync } from 'node:fs';
import type { Config } from './config';

/** Connection options shared by clients and workers: address, TLS/mTLS, API key (from files). */
export function connectionOptions(config: Config) {
  const t = config.temporal;
  const tls = t.tls
    ? {
        serverNameOverride: t.tls.serverName,
        serverRootCACertificate: t.tls.caPath ? readFileSync(t.tls.caPath) : undefined,
        clientCertPair:
          t.tls.certPath && t.tls.keyPath ? { crt: readFileSync(t.tls.certPath), key: readFileSync(t.tls.keyPath) } : undefined,
      }
    : undefined;
  const apiKey = t.apiKeyPath ? readFileSync(t.apiKeyPath, 'utf8').trim() : undefined;
  return { address: t.address, ...(tls ? { tls } : {}), ...(apiKey ? { apiKey, tls: tls ?? true } : {}) };
}
