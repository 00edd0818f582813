import { SEARCH_ATTRIBUTE_TYPES } from '../../model/search-attributes';
import { HELP, TEMPORAL_COMMAND } from '../options';
import type { CommandSpec } from '../options';

export const SETUP = {
  name: 'setup',
  usage: ['[options]'],
  summary: 'prepare the Temporal namespace for vmsnap (search attributes); idempotent',
  about: `Prepares the Temporal namespace for vmsnap: registers the search attributes its runs and
schedules carry (${Object.entries(SEARCH_ATTRIBUTE_TYPES).map(([k, t]) => `${k} ${t}`).join(', ')})
where they are missing, with the operator service's AddSearchAttributes. Idempotent: on a
prepared namespace it registers nothing and exits 0. Run it once per namespace, before the first
worker starts; it needs a client the server lets call the operator service.`,
  options: { ...TEMPORAL_COMMAND, ...HELP },
  notes: `Exit code: 0 prepared, 1 a search attribute has another type or the server refused to add one,
4 Temporal unreachable.`,
} as const satisfies CommandSpec;
