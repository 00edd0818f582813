/*
 * The fields that tie a log line to a run: `workflowId`, `runId` and, where it is known, `domain`.
 * One definition for every writer of such lines — the workflow sandbox's log interceptor, the
 * activities' bound logger, the safety net's lines about a journaled freeze — so an operator's
 * filter (`jq 'select(.workflowId == "…")'`) finds them all by the same names.
 */

export type RunLogFields = {
  workflowId?: string;
  runId?: string;
  domain?: string;
};

/**
 * The domain a workflow's or activity's input names: `domainName`, else `domain` (a name or UUID,
 * as the caller gave it), else `domain.name`. Inputs that name none (a registry's, a disk batch's)
 * give nothing rather than a guess.
 */
export function domainOfInput(input: unknown): RunLogFields {
  if (!input || typeof input !== 'object') return {};
  const o = input as { domainName?: unknown; domain?: unknown };
  if (typeof o.domainName === 'string') return { domain: o.domainName };
  if (typeof o.domain === 'string') return { domain: o.domain };
  const name = o.domain && typeof o.domain === 'object' ? (o.domain as { name?: unknown }).name : undefined;
  return typeof name === 'string' ? { domain: name } : {};
}

/** A freeze owner `<workflowId>/<runId>` as fields; a workflow id may itself contain `/`, a run id never does. */
export function ownerFields(owner: string): RunLogFields {
  const i = owner.lastIndexOf('/');
  return i > 0 && i < owner.length - 1 ? { workflowId: owner.slice(0, i), runId: owner.slice(i + 1) } : {};
}

/** A journaled or cluster-wide freeze's run and domain: the safety net's lines about it carry these. */
export function freezeFields(freeze: { domainName: string; owner: string }): RunLogFields {
  return { domain: freeze.domainName, ...ownerFields(freeze.owner) };
}
