import type { Config } from '../config';
import type { RunScope } from '../model/identity';
import { resolveScope } from '../worker/scope';
import { temporalFailure } from './service-errors';
import { withClient } from './temporal-client';

/**
 * The scope whose images this command may remove: the same a worker of this namespace resolves
 * (src/worker/scope.ts). Temporal is asked only when no fleetId is configured.
 */
export async function commandScope(config: Config): Promise<RunScope> {
  if (config.fleetId) return { namespace: config.temporal.namespace, cluster: config.fleetId };
  return withClient(config, (client) =>
    resolveScope(config, client).catch((err: unknown) => {
      throw temporalFailure(`cannot read namespace ${config.temporal.namespace} (its id tells this fleet's images)`, err);
    }),
  );
}
