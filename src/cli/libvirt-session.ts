import { LibvirtClient, isAuthRefused } from '../libvirt';
import { CliError, Exit } from './exit-codes';

/** The host's libvirtd for one CLI command; unreachable is exit 4, an authentication refusal exit 6. */
export async function connectLibvirt(uri: string): Promise<LibvirtClient> {
  try {
    return await LibvirtClient.connect({ uri });
  } catch (err) {
    if (isAuthRefused(err)) throw new CliError(`libvirt at ${uri} refused vmsnap: ${err.message}`, Exit.authRefused);
    throw new CliError(`cannot reach libvirt at ${uri}: ${(err as Error).message}`, Exit.unreachable);
  }
}
