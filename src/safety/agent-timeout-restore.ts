import { AGENT_TIMEOUT_LIBVIRT_START, isNoDomain } from '../libvirt';
import type { LibvirtClient } from '../libvirt';
import type { JournalEntry } from './freeze-journal';

/**
 * Puts back the domain's agent response timeout that the freeze replaced (libvirt keeps it for
 * the domain's life; another orchestrator's quiesce may rely on it). Best effort: a failure is
 * returned for the caller to log, never thrown — it must not block forgetting a proven thaw.
 */
export async function restoreAgentTimeout(lv: LibvirtClient, entry: Pick<JournalEntry, 'domainUuid' | 'previousAgentTimeout'>): Promise<string | undefined> {
  const value = entry.previousAgentTimeout ?? AGENT_TIMEOUT_LIBVIRT_START;
  try {
    const dom = await lv.lookupDomainByUuid(entry.domainUuid);
    await lv.setAgentResponseTimeout(dom, value);
    return undefined;
  } catch (err) {
    if (isNoDomain(err)) return undefined;
    return `could not restore the agent timeout (${value}): ${err instanceof Error ? err.message : String(err)}`;
  }
}
