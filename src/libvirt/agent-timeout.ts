import { readFile } from 'node:fs/promises';
import path from 'node:path';

/**
 * The domain's current guest-agent response timeout, which libvirt offers no API to read: it lives
 * only in libvirtd's status XML (`<statusDir>/<name>.xml`, `<agentTimeout>N</agentTimeout>`, written
 * for every value, 0 included: checked on libvirt 9.0). vmsnap sets its own timeout for a freeze
 * (virDomainAgentSetResponseTimeout) and must put back what another orchestrator relied on.
 * Undefined when the file cannot be read (another host layout, no permission).
 */
export async function readAgentResponseTimeout(statusDir: string, domainName: string): Promise<number | undefined> {
  if (domainName.includes('/') || domainName.startsWith('.')) return undefined;
  let xml: string;
  try {
    xml = await readFile(path.join(statusDir, `${domainName}.xml`), 'utf8');
  } catch {
    return undefined;
  }
  const m = /<agentTimeout>(-?\d+)<\/agentTimeout>/.exec(xml);
  return m ? Number(m[1]) : undefined;
}

/**
 * VIR_DOMAIN_AGENT_RESPONSE_TIMEOUT_BLOCK: the value libvirt 9 gives every domain when it starts.
 * Restored when the previous value could not be read, since it is what an untouched domain has.
 */
export const AGENT_TIMEOUT_LIBVIRT_START = -2;
