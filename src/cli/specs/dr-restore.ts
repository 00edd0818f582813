import { CEPH, CONFIG, HELP, JSON_OUTPUT, LIBVIRT_RW } from '../options';
import type { CommandSpec } from '../options';

export const DR_RESTORE = {
  name: 'dr-restore',
  usage: ['<domain> --as NEW-NAME --secret UUID [--from RUN|latest] [--force | --planned] [options]'],
  summary: 'recover a VM on the DR site from a DR run\'s quiesced snapshot (promotes the DR copies)',
  about: `Run on a host attached to the DR cluster (config drCeph; the primary cluster is config ceph),
with no Temporal needed: the primary site may be gone. Finds the DR point record that DR runs
(snapshot --mirror) write on each disk and rbd-mirror carries to the DR site, checks everything on
both sites first (the point is whole there, its record's MAC, the new name free, the primary
images not still primary), then promotes each DR copy (with force when the primary cannot be
reached; plainly when it was demoted), clones each disk from the run's own snapshot (not from the
image head, the crash-consistent state at the mirror snapshot), defines the recorded VM under
NEW-NAME with its disks on the DR cluster, starts it and waits for its guest agent. Reports
quiesced as the run's record says it. --planned is Ceph's planned failover, with the primary VM
shut off: demote its images on the primary site, wait until the DR copies have the demotion,
promote them without force.`,
  options: {
    from: { type: 'string', arg: 'RUN|latest', help: "the DR run's workflow id, or the newest DR point the DR site holds whole (default)" },
    as: { type: 'string', arg: 'NEW-NAME', help: 'the recovered VM: the recorded definition with this name, a new UUID and MAC addresses, disks <NEW-NAME>-<target>' },
    secret: { type: 'string', arg: 'UUID', help: "the libvirt ceph secret with the DR cluster's key of --auth-user (virsh secret-define)" },
    'auth-user': { type: 'string', arg: 'ID', help: "the cephx user QEMU opens the disks as on the DR cluster (default: the recorded definition's)" },
    'disk-ceph-conf': { type: 'string', arg: 'FILE', complete: 'file', help: "the ceph.conf QEMU reaches the DR cluster with (default: drCeph's conf)" },
    pool: { type: 'string', arg: 'POOL', help: "the VM disks' pool on the DR site (default vms)" },
    force: { type: 'boolean', help: 'promote even though the primary images are still primary and reachable: both sites then take writes (split brain)' },
    planned: { type: 'boolean', help: 'planned failover: demote the primary images (their VM shut off, else refused), wait for the demotion on the DR site, promote without force' },
    'demotion-wait': {
      type: 'string',
      arg: 'DURATION',
      help: 'with --planned, how long to wait for the demotion to reach the DR site (default 5m)',
      duration: {},
    },
    verify: { type: 'boolean', help: "sha256 of each recovered disk before the VM starts, in the result" },
    'no-start': { type: 'boolean', help: 'define the recovered VM but leave it shut off (promoted and cloned all the same)' },
    'ready-timeout': {
      type: 'string',
      arg: 'DURATION',
      help: "how long to wait for the recovered VM's agent (default 3m)",
      duration: {},
    },
    ...JSON_OUTPUT,
    ...CONFIG,
    ...LIBVIRT_RW,
    ...CEPH,
    ...HELP,
  },
  notes: `Exit codes: 0 the VM runs and its agent answers; 2 refused before anything changed (no DR
point of the domain, the run not on the DR site, an untrusted record, a name in use, the primary
still primary without --force or --planned; with --planned: the primary VM still running, the
primary site unreachable); 4 the DR cluster or libvirt unreachable; 1 failed after the
promotion (the VM and its disks are removed again; the promotion stays), or --planned's demotion
not on the DR site in time (the primary stays demoted; run it again to wait on).`,
} as const satisfies CommandSpec;
