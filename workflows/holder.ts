import { defineSignal, getExternalWorkflowHandle, setHandler } from '@temporalio/workflow';

/** What a lock or limit sends a holder run to learn whether it still runs; the holder does nothing with it. */
export const holderProbe = defineSignal('lock-holder-probe');

/**
 * Whether the holder run is still open: a signal to a closed run fails "not found". Any other
 * failure (a signal limit, the server) says nothing about the run, so what it holds stays held.
 * Without a run id: whether any run of the workflow id is open (the one a Reset made included).
 * The one fencing rule of vmsnap's mutexes (the domain lock, the fleet limits): only a closed
 * holder lets go, never a live one.
 */
export async function stillRuns(holder: { workflowId: string; runId?: string }): Promise<boolean> {
  try {
    await getExternalWorkflowHandle(holder.workflowId, holder.runId).signal(holderProbe);
    return true;
  } catch (err) {
    return !/not found/i.test(String((err as Error)?.message ?? err));
  }
}

/** A run that holds locks or turns answers their probes (a no-op: the delivery is the answer). */
export function answerHolderProbes(): void {
  setHandler(holderProbe, () => undefined);
}
