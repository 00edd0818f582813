import { CEPH, CONFIG, HELP, JSON_OUTPUT, LIBVIRT_RW } from '../options';
import type { CommandSpec } from '../options';

const COMMON = { ...JSON_OUTPUT, ...CONFIG, ...LIBVIRT_RW, ...CEPH, ...HELP } as const;

const TIMEOUT = {
  timeout: {
    type: 'string',
    arg: 'DURATION',
    help: 'bound on each image change, which goes through the image lock owner (a running VM\'s QEMU) (default 30s)',
    duration: { min: 1000, max: 600_000 },
  },
} as const;

export const MIRROR_ENABLE = {
  name: 'mirror enable',
  usage: ['<domain> [options]'],
  summary: "mirror every RBD disk of a VM to the DR site in snapshot mode; idempotent",
  about: `Makes every RBD disk of the domain (as this host's libvirtd defines it) mirror to the DR site
in snapshot mode, primary here: what \`rbd feature enable IMG exclusive-lock\` and \`rbd mirror image
enable IMG snapshot\` do, for each disk. Checks first, before changing anything: each disk's pool
mirrors in image mode and has a peer site that pulls from it (vmsnap never changes a pool's
mirroring: the error names the Ceph command), and no disk mirrors in journal mode or is a copy.
A disk that already mirrors in snapshot mode is left as it is; enabling twice is one enable.`,
  options: { ...TIMEOUT, ...COMMON },
  notes: 'Exit code: 0 when every disk mirrors (or already did); 2 when refused before any change; 1 when a change failed or timed out (the output says which disks changed).',
} as const satisfies CommandSpec;

export const MIRROR_STATUS = {
  name: 'mirror status',
  usage: ['<domain> [options]'],
  summary: "each RBD disk's mirroring: mode, state, primary, and what the DR site has",
  about: `Per RBD disk of the domain: mirroring state and mode, primary here or not, what each site's
rbd-mirror last reported (\`up+replaying\`, ...), and the pool's mirror mode and peers. With a DR
site configured (drCeph), what it holds: the copy, its rbd-mirror's status of it, the newest mirror
snapshot copied in full. Reads only.`,
  options: COMMON,
  notes: 'Exit code: 0 when read (whatever the state); 2 for an unknown domain or flag.',
} as const satisfies CommandSpec;

export const MIRROR_DISABLE = {
  name: 'mirror disable',
  usage: ['<domain> [options]'],
  summary: "stop mirroring a VM's RBD disks; idempotent",
  about: `Stops mirroring every RBD disk of the domain (\`rbd mirror image disable IMG\`): its mirror
snapshots are removed here, and rbd-mirror removes the DR site's copy. Image features stay. A disk
that does not mirror is left as it is; refused (before any change) for a disk that is a copy here.`,
  options: { ...TIMEOUT, ...COMMON },
  notes: 'Exit code: 0 when no disk mirrors any more (or none did); 2 when refused before any change; 1 when a change failed or timed out.',
} as const satisfies CommandSpec;

export const MIRROR = {
  name: 'mirror',
  usage: ['enable|status|disable <domain> [options]'],
  summary: "a VM's RBD disks' mirroring to the DR site (snapshot mode): enable, status, disable",
  about: `Sets up, reads and removes the per-image side of rbd-mirror in snapshot mode for a VM's RBD
disks, which DR runs (vmsnap snapshot --mirror) need (docs/dr.md). The pool's side (mirror mode,
peers, the rbd-mirror daemon) is the operator's.`,
  options: { ...HELP },
  subcommands: { enable: MIRROR_ENABLE, status: MIRROR_STATUS, disable: MIRROR_DISABLE },
} as const satisfies CommandSpec;
