import { LibvirtClient } from '../libvirt';
import { CliError, Exit } from './exit-codes';

/** The host's libvirtd for one CLI command; unreachable is exit 4. */
export async function connectLibvirt(uri: string): Promise<LibvirtClient> {
  try {
    return await LibvirtClient.connect({ uri });
  } catch (err) {
    throw new CliError(`cannot reach libvirt at ${uri}: ${(err as Error).message}`, Exit.unreachable);
  }
}
