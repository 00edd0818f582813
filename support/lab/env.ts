/**
 * The lab's environment file (`.lab/env`, written by `npm run lab:up`), parsed into a typed object
 * for tests, benchmarks and the demo. The one reader of that file on the TypeScript side: every
 * caller finds the lab the same way as the lab's shell scripts do ({@link defaultLabDir}).
 *
 * The file is shell-sourceable: one `export KEY='value'` line per key. The Ceph and Temporal keys
 * are always there once the lab is up; the libvirt and guest keys only when those components are.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** Thrown when the lab's env file is missing or lacks a key the caller needs. */
export class LabNotUpError extends Error {
  override readonly name = 'LabNotUpError';
}

export interface LabTemporalEnv {
  /** `host:port` of the frontend gRPC service, e.g. `127.0.0.1:7233`. */
  readonly address: string;
  readonly namespace: string;
  /** The Web UI, e.g. `http://127.0.0.1:8233`. */
  readonly uiUrl: string;
  /** The `temporal` CLI binary the server runs from. */
  readonly bin: string;
}

export interface LabCephEnv {
  /** `-c` argument for the ceph/rbd CLIs and `rados_conf_read_file`. */
  readonly conf: string;
  /** Admin client id (`--id`), full rights. */
  readonly adminId: string;
  readonly adminKeyring: string;
  /** Restricted client id: `profile rbd` on the VM and image pools only. */
  readonly vmsnapId: string;
  readonly vmsnapKeyring: string;
  readonly monHost: string;
  readonly monPort: number;
}

export interface LabPools {
  /** VM disks. */
  readonly vm: string;
  /** Images (clones' parents, exports). */
  readonly image: string;
  /** A pool the restricted client may not touch. */
  readonly other: string;
}

export interface LabLibvirtEnv {
  /** `qemu:///system?socket=...` of the lab's private libvirtd. */
  readonly uri: string;
  readonly socket: string;
  /** libvirtd's QEMU status dir (domain agent timeouts), inside the lab's libvirt dir. */
  readonly statusDir?: string;
}

export interface LabGuestsEnv {
  readonly oneDisk: string;
  readonly threeDisk: string;
  readonly noAgent: string;
  /** The guests lab:up starts on host A (the `libvirt` connection). */
  readonly all: readonly string[];
  readonly probeDir: string;
  /** The small guest lab:up starts on host B; absent in a lab without host B. */
  readonly hostB?: string;
  /** `lab/migrate.sh GUEST a|b [--paused]` (exit 3: the guest crashed after the move, a lab artefact). */
  readonly migrate?: string;
}

/** One of the lab's two hypervisor hosts (lab/libvirt.sh): a private libvirtd. */
export interface LabHostEnv {
  /** Host id for a vmsnap worker on this host (`hv-a`, `hv-b`; task queue `vmsnap-<name>`). */
  readonly name: string;
  readonly libvirt: LabLibvirtEnv;
  /** The `host_uuid` in this libvirtd's libvirtd.conf. */
  readonly hostUuid: string;
  /** The user this libvirtd runs QEMU as (qemu.conf `user`): root on A, Debian's libvirt-qemu on B. */
  readonly qemuUser: string;
  /** The guests lab:up starts here (guests migrate: ask libvirt where one runs now). */
  readonly guests: readonly string[];
}

export interface LabEnv {
  /** The lab directory (`.lab`). */
  readonly dir: string;
  readonly temporal: LabTemporalEnv;
  readonly ceph: LabCephEnv;
  readonly pools: LabPools;
  /** Absent when the lab runs without the libvirt component. */
  readonly libvirt?: LabLibvirtEnv;
  /** Absent when the lab runs without guests. */
  readonly guests?: LabGuestsEnv;
  /** Host A (the `libvirt` above) and host B; absent when the lab runs without libvirt. */
  readonly hosts?: { readonly a: LabHostEnv; readonly b: LabHostEnv };
  /** Every key of the file, including ones this type does not name. */
  readonly raw: Readonly<Record<string, string>>;
}

const LINE = /^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$/;

/** Parse `export KEY='value'` lines; blank lines and `#` comments are skipped. */
export function parseEnvFile(text: string): Record<string, string> {
  const vars: Record<string, string> = {};
  for (const [index, rawLine] of text.split('\n').entries()) {
    const line = rawLine.trim();
    if (line === '' || line.startsWith('#')) continue;
    const match = LINE.exec(line);
    if (!match) throw new Error(`lab env line ${index + 1} is not KEY=value: ${line}`);
    const [, key, value] = match as unknown as [string, string, string];
    vars[key] = unquote(value);
  }
  return vars;
}

function unquote(value: string): string {
  const quoted = /^'(.*)'$/.exec(value) ?? /^"(.*)"$/.exec(value);
  return quoted ? (quoted[1] as string) : value;
}

/**
 * The default lab directory, by the lab scripts' rule (lab/lib.sh, scripts/bootstrap.mjs):
 * `$LAB_DIR`, else `$VMSNAP_LAB_DIR`, else `.lab` in the repository root.
 */
export function defaultLabDir(): string {
  return process.env.LAB_DIR ?? process.env.VMSNAP_LAB_DIR ?? path.join(repoRoot(), '.lab');
}

function repoRoot(): string {
  let dir = __dirname;
  while (!existsSync(path.join(dir, 'package.json'))) {
    const parent = path.dirname(dir);
    if (parent === dir) return process.cwd();
    dir = parent;
  }
  return dir;
}

/**
 * Every key of the lab's env file, untyped, for callers that pass keys through (e.g. as a child's
 * environment).
 *
 * @param dir the lab directory; defaults to {@link defaultLabDir}.
 * @throws {@link LabNotUpError} when the file is missing.
 */
export function labVars(dir: string = defaultLabDir()): Record<string, string> {
  const file = path.join(dir, 'env');
  if (!existsSync(file)) {
    throw new LabNotUpError(`lab is not up: run npm run lab:up (no ${file})`);
  }
  return parseEnvFile(readFileSync(file, 'utf8'));
}

/**
 * `vars[key]`, which the lab must have written.
 *
 * @throws {@link LabNotUpError} when the key is missing or empty (a lab started without that part).
 */
export function need(vars: Readonly<Record<string, string>>, key: string): string {
  const value = vars[key];
  if (value === undefined || value === '') {
    throw new LabNotUpError(`lab is not fully up: run npm run lab:up (its env has no ${key})`);
  }
  return value;
}

/**
 * Read and type the lab's env file.
 *
 * @param dir the lab directory; defaults to {@link defaultLabDir}.
 * @throws {@link LabNotUpError} when the file is missing or lacks a Ceph/Temporal key.
 */
export function loadLabEnv(dir: string = defaultLabDir()): LabEnv {
  const raw = labVars(dir);
  const written = (key: string): string => need(raw, key);
  return {
    dir,
    temporal: {
      address: written('TEMPORAL_ADDRESS'),
      namespace: written('TEMPORAL_NAMESPACE'),
      uiUrl: written('TEMPORAL_UI_URL'),
      bin: written('TEMPORAL_BIN'),
    },
    ceph: {
      conf: written('CEPH_CONF'),
      adminId: written('CEPH_ID'),
      adminKeyring: written('CEPH_KEYRING'),
      vmsnapId: written('CEPH_VMSNAP_ID'),
      vmsnapKeyring: written('CEPH_VMSNAP_KEYRING'),
      monHost: written('CEPH_MON_HOST'),
      monPort: Number(written('CEPH_MON_PORT')),
    },
    pools: {
      vm: written('VMSNAP_VM_POOL'),
      image: written('VMSNAP_IMAGE_POOL'),
      other: written('VMSNAP_OTHER_POOL'),
    },
    libvirt:
      raw.LIBVIRT_DEFAULT_URI === undefined
        ? undefined
        : { uri: raw.LIBVIRT_DEFAULT_URI, socket: written('LIBVIRT_SOCKET'), statusDir: raw.VMSNAP_LIBVIRT_STATUS_DIR },
    guests:
      raw.VMSNAP_GUESTS === undefined
        ? undefined
        : {
            oneDisk: written('VMSNAP_GUEST_1DISK'),
            threeDisk: written('VMSNAP_GUEST_3DISK'),
            noAgent: written('VMSNAP_GUEST_NOAGENT'),
            all: raw.VMSNAP_GUESTS.split(/\s+/).filter((name) => name !== ''),
            probeDir: written('VMSNAP_PROBE_DIR'),
            hostB: raw.VMSNAP_GUEST_HOSTB,
            migrate: raw.VMSNAP_LAB_MIGRATE,
          },
    hosts:
      raw.LIBVIRT_B_URI === undefined
        ? undefined
        : {
            a: labHost(raw, written, '', 'A'),
            b: labHost(raw, written, '_B', 'B'),
          },
    raw,
  };
}

function labHost(raw: Record<string, string>, need: (key: string) => string, infix: '' | '_B', letter: 'A' | 'B'): LabHostEnv {
  return {
    name: need(`VMSNAP_LAB_HOST_${letter}`),
    libvirt: {
      uri: need(infix === '' ? 'LIBVIRT_DEFAULT_URI' : 'LIBVIRT_B_URI'),
      socket: need(`LIBVIRT${infix}_SOCKET`),
      statusDir: raw[`VMSNAP_LIBVIRT${infix}_STATUS_DIR`],
    },
    hostUuid: need(`LIBVIRT${infix}_HOST_UUID`),
    qemuUser: need(`LIBVIRT${infix}_QEMU_USER`),
    guests: (raw[`VMSNAP_GUESTS_${letter}`] ?? '').split(/\s+/).filter((name) => name !== ''),
  };
}

/** The lab's DR site (lab/dr.sh): a second Ceph cluster whose rbd-mirror pulls the lab's `vms` pool. */
export interface LabDrEnv {
  readonly conf: string;
  readonly adminId: string;
  readonly adminKeyring: string;
  /** `profile rbd` on the DR cluster's vms and images pools: what a worker reads the DR site with. */
  readonly vmsnapId: string;
  readonly vmsnapKeyring: string;
  /** The mirrored pool, under the same name on both clusters. */
  readonly pool: string;
  /** The DR site's name (`rbd mirror pool info`), the lab cluster's is `lab`. */
  readonly site: string;
  readonly mirrorLog: string;
}

/**
 * The DR site's keys, from the files lab/dr.sh writes (env.d/ceph-dr.env, env.d/dr.env): the tests
 * that need it start it themselves, and only lab:up assembles `env`.
 *
 * @throws {@link LabNotUpError} when the DR site is not up.
 */
export function loadLabDrEnv(dir: string = defaultLabDir()): LabDrEnv {
  const raw: Record<string, string> = {};
  for (const f of ['ceph-dr.env', 'dr.env']) {
    const file = path.join(dir, 'env.d', f);
    if (!existsSync(file)) throw new LabNotUpError(`the lab's DR site is not up: run bash lab/dr.sh up (no ${file})`);
    Object.assign(raw, parseEnvFile(readFileSync(file, 'utf8')));
  }
  const written = (key: string): string => need(raw, key);
  return {
    conf: written('CEPH_DR_CONF'),
    adminId: written('CEPH_DR_ID'),
    adminKeyring: written('CEPH_DR_KEYRING'),
    vmsnapId: written('CEPH_DR_VMSNAP_ID'),
    vmsnapKeyring: written('CEPH_DR_VMSNAP_KEYRING'),
    pool: written('VMSNAP_DR_POOL'),
    site: written('VMSNAP_DR_SITE'),
    mirrorLog: written('VMSNAP_DR_MIRROR_LOG'),
  };
}

/** A lab hypervisor host's connection (lab/libvirt.sh): host A is the one every test used before B. */
export interface LabHypervisor {
  /** Host id for its worker: task queue `vmsnap-<name>`. */
  name: string;
  uri: string;
  statusDir?: string;
}

export function labHypervisor(vars: Record<string, string>, host: 'a' | 'b'): LabHypervisor {
  return host === 'a'
    ? { name: vars.VMSNAP_LAB_HOST_A ?? 'hv-a', uri: need(vars, 'LIBVIRT_DEFAULT_URI'), statusDir: vars.VMSNAP_LIBVIRT_STATUS_DIR }
    : { name: need(vars, 'VMSNAP_LAB_HOST_B'), uri: need(vars, 'LIBVIRT_B_URI'), statusDir: vars.VMSNAP_LIBVIRT_B_STATUS_DIR };
}

/** Environment for a `vmsnap worker` process on a lab host (WorkerProcess's extraEnv). */
export function labHostWorkerEnv(vars: Record<string, string>, host: 'a' | 'b'): Record<string, string> {
  const h = labHypervisor(vars, host);
  return { VMSNAP_LIBVIRT_URI: h.uri, ...(h.statusDir ? { VMSNAP_LIBVIRT_STATUS_DIR: h.statusDir } : {}) };
}
