import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';

const LIB = path.resolve(__dirname, '../../lab/lib.sh');

/**
 * The Temporal CLI that lab/deps.sh builds once and caches (scripts/bootstrap.mjs runs deps.sh
 * for every lane). Asked of lab/lib.sh itself, so the version, VMSNAP_CACHE and the TEMPORAL_BIN
 * override are resolved in one place for the lab and the tests alike.
 */
export function temporalBinary(): string {
  const bin = execFileSync('bash', ['-c', 'source "$1" && printf %s "${TEMPORAL_BIN:-$TEMPORAL_BIN_DEFAULT}"', 'temporal-binary', LIB], {
    encoding: 'utf8',
  });
  if (!existsSync(bin)) {
    throw new Error(`no Temporal CLI at ${bin}: run \`node scripts/bootstrap.mjs\` (its lab/deps.sh step builds it once and caches it)`);
  }
  return bin;
}
