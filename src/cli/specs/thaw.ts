import { CEPH, CONFIG, HELP, HOST_ID, JSON_OUTPUT, LIBVIRT_RW, STATE_DIR } from '../options';
import type { CommandSpec } from '../options';

export const THAW = {
  name: 'thaw',
  usage: ['<domain> [options]'],
  summary: 'emergency thaw of a guest on this host',
  about: `Emergency thaw, straight through this host's libvirt (no Temporal needed): the operator's
override, which ends ANY freeze of the guest — vmsnap's or not — and says whose it ended.
virDomainFSThaw, then guest-fsfreeze-status until "thawed" (the same thaw every vmsnap layer
uses). Clears vmsnap's journal entry for the guest and its freeze obligation in Ceph; a run
whose window it ends reports quiesced: false.`,
  options: { ...JSON_OUTPUT, ...CONFIG, ...LIBVIRT_RW, ...STATE_DIR, ...HOST_ID, ...CEPH, ...HELP },
} as const satisfies CommandSpec;

export const ARRIVAL_GUARD = {
  name: 'arrival-guard',
  usage: ['<domain-uuid> [options]'],
  summary: '(started by libvirt\'s hook) thaw a guest that migrated here frozen, at its deadline',
  about: `Started by libvirt's QEMU hook (deploy/libvirt-hook-qemu) when a guest migrates in or is
restored on this host; not meant to be run by hand. If vmsnap froze the guest on another host
and its freeze obligation (in Ceph) is still open, it thaws the guest here once the freeze's
deadline (plus clockSkewMs) has passed — with no Temporal, no freezing host and no worker on this
host needed — then resolves the obligation. It ends when there is no open obligation for the
guest, or the guest is no longer here, or after VMSNAP_ARRIVAL_GUARD_MAX_MS (default 1 h).`,
  options: { ...CONFIG, ...LIBVIRT_RW, ...STATE_DIR, ...HOST_ID, ...CEPH, ...HELP },
} as const satisfies CommandSpec;
