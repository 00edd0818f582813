import { CEPH, HELP, HOST_ID, LIBVIRT, STATE_DIR, TEMPORAL_COMMAND } from '../options';
import type { CommandSpec } from '../options';

export const DOCTOR = {
  name: 'doctor',
  usage: ['[--fix] [--domain D ...] [options]'],
  summary: 'check Temporal, libvirt, guest agents, disks and Ceph; says how to fix',
  about: `Checks what a snapshot needs, one line per check with OK, WARN or FAIL and how to fix it:
  Temporal reachable, namespace, vmsnap's search attributes, a worker on this host's queue;
  libvirt reachable; each running domain's guest agent (guest-ping) and its disks (RBD or not);
  Ceph reachable with the configured id and keyring; the image pool and the disks' pools open;
  with a DR site configured (drCeph): it answers, the disks' pools mirror in image mode with a
  peer, its rbd-mirror is running, and each disk mirrors in snapshot mode with a copy there that
  rbd-mirror replays.`,
  options: {
    fix: { type: 'boolean', help: 'register missing search attributes, as `vmsnap setup` does' },
    domain: { type: 'string', multiple: true, arg: 'D', help: 'check only this domain; default: every running domain' },
    'agent-timeout': {
      type: 'string',
      arg: 'DURATION',
      help: 'guest-ping timeout, whole seconds, 1s to 99s (default 5s)',
      duration: { min: 1000, max: 99_000, step: 1000, legacy: { flag: 'agent-timeout-s', unit: 's' } },
    },
    'image-pool': { type: 'string', arg: 'POOL', help: 'the pool flattened images go to (default from config: images)' },
    ...HOST_ID,
    ...STATE_DIR,
    ...TEMPORAL_COMMAND,
    ...LIBVIRT,
    ...CEPH,
    ...HELP,
  },
  notes: `Exit code: 0 when nothing FAILs (WARNs allowed), 1 on a FAIL, 4 when a service is unreachable,
6 when libvirtd refused to authenticate vmsnap (polkit denied, or SASL configured).`,
} as const satisfies CommandSpec;
