import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { execFileSync, spawn } from 'node:child_process';
import { rbd, run, virsh } from './cli-tools';
import type { LabEnv } from './env';

/**
 * A throw-away lab guest of its own, on host A: the lab guests' kernel and initramfs (the same
 * init, qemu-ga, fsfreeze hook and freeze probe) and fresh ext4 RBD data disks (64 MiB and 256 MiB
 * of memory as the lab's, unless asked for more), its console
 * stamped into `<probeDir>/<name>/ticks.log` by the lab's own stamper, so the probe helpers read it
 * like any lab guest's. For what must not be done to the shared guests — restarting their agent
 * with other options (the pre-flush test), or freezing them where other engineers' runs freeze
 * them too (the write-load bench). `remove()` destroys it, its disks (snapshots included), its
 * stamper and its directory.
 */
export interface ScratchGuest {
  name: string;
  dir: string;
  remove(): Promise<void>;
  /** The same, synchronously: for a signal handler that exits right after. */
  removeSync(): void;
}

const ROOT = path.resolve(__dirname, '../..');
const TARGETS = ['vdb', 'vdc', 'vdd'];

export async function startScratchGuest(env: LabEnv, template: string, o: { disks?: number; memoryMiB?: number; diskMiB?: number } = {}): Promise<ScratchGuest> {
  if (!env.guests) throw new Error('the lab env has no guests (run npm run lab:up)');
  const name = `vmsnap-scratch-${randomUUID().slice(0, 8)}`;
  const dir = path.join(env.guests.probeDir, name);
  const targets = TARGETS.slice(0, o.disks ?? 1);
  const images = targets.map((t) => `${env.pools.vm}/${name}-${t}`);
  const xml = (await virsh(env, ['dumpxml', '--inactive', template])).stdout;
  const pick = (re: RegExp) => {
    const m = re.exec(xml);
    if (!m) throw new Error(`${template}'s domain XML has no ${re}`);
    return m[1]!;
  };
  const parts = {
    kernel: pick(/<kernel>([^<]+)<\/kernel>/),
    initrd: pick(/<initrd>([^<]+)<\/initrd>/),
    secret: pick(/<secret type='ceph' uuid='([^']+)'/),
    auth: pick(/<auth username='([^']+)'/),
    conf: pick(/<config file='([^']+)'/),
  };
  const removeAll = async () => {
    await virsh(env, ['destroy', name]).catch(() => undefined);
    await virsh(env, ['undefine', name]).catch(() => undefined);
    stopStamper(dir);
    for (const image of images) {
      await rbd(env, ['snap', 'purge', '--no-progress', image]).catch(() => undefined);
      await rbd(env, ['rm', '--no-progress', image]).catch(() => undefined);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    mkdirSync(dir, { recursive: true });
    const raw = path.join(dir, 'disk.raw');
    for (const [i, image] of images.entries()) {
      await run('truncate', ['-s', `${o.diskMiB ?? 64}M`, raw]);
      await run('mkfs.ext4', ['-q', '-F', '-b', '4096', '-L', targets[i]!, '-E', 'lazy_itable_init=0,lazy_journal_init=0', raw]);
      await rbd(env, ['import', '--no-progress', '--image-format', '2', raw, image]);
      rmSync(raw);
    }
    startStamper(env, name, dir);
    const file = path.join(dir, 'domain.xml');
    writeFileSync(file, domainXml(name, images, targets, dir, o.memoryMiB ?? 256, parts));
    await virsh(env, ['define', file]);
    await virsh(env, ['start', name]);
    await waitUntil(`${name}'s agent to answer and its probe to tick`, async () => (await agentAnswers(env, name)) && probeTicks(dir, targets), 120_000);
    return { name, dir, remove: removeAll, removeSync: () => removeSync(env, name, dir, images) };
  } catch (err) {
    await removeAll();
    throw err;
  }
}

function removeSync(env: LabEnv, name: string, dir: string, images: string[]): void {
  const tryRun = (cmd: string, args: string[]) => {
    try {
      execFileSync(cmd, args, { stdio: 'ignore', timeout: 60_000 });
    } catch {
      // already gone, or unreachable: the next lab:up or a person cleans up
    }
  };
  const virshArgs = ['-q', '-c', env.libvirt!.uri];
  const rbdArgs = ['-c', env.ceph.conf, '--id', env.ceph.adminId, '--keyring', env.ceph.adminKeyring];
  tryRun('virsh', [...virshArgs, 'destroy', name]);
  tryRun('virsh', [...virshArgs, 'undefine', name]);
  stopStamper(dir);
  rmSync(dir, { recursive: true, force: true });
  // The exiting process may still hold the disks open (its watch outlives it until the OSD times it
  // out, ~30 s), so a detached shell removes them, retrying for two minutes.
  const script = 'conf=$1; id=$2; keyring=$3; shift 3; for i in $(seq 40); do ok=1; for img in "$@"; do ' +
    'rbd -c "$conf" --id "$id" --keyring "$keyring" snap purge --no-progress "$img" >/dev/null 2>&1; ' +
    'rbd -c "$conf" --id "$id" --keyring "$keyring" info "$img" >/dev/null 2>&1 || continue; ' +
    'rbd -c "$conf" --id "$id" --keyring "$keyring" rm --no-progress "$img" >/dev/null 2>&1 || ok=0; done; [ $ok = 1 ] && exit 0; sleep 3; done; exit 1';
  spawn('bash', ['-c', script, 'scratch-cleanup', rbdArgs[1]!, rbdArgs[3]!, rbdArgs[5]!, ...images], { detached: true, stdio: 'ignore' }).unref();
}

/** The lab's console stamper (lab/guests.sh _stamp), in a session of its own: its pid is its group. */
function startStamper(env: LabEnv, name: string, dir: string): void {
  const child = spawn('bash', [path.join(ROOT, 'lab/guests.sh'), '_stamp', name, dir, '+1'], {
    detached: true,
    stdio: 'ignore',
    env: { ...process.env, LAB_DIR: env.dir },
  });
  child.unref();
}

function stopStamper(dir: string): void {
  let pid: number;
  try {
    pid = Number(readFileSync(path.join(dir, 'stamper.pid'), 'utf8').trim());
  } catch {
    return;
  }
  if (Number.isInteger(pid) && pid > 1) {
    try {
      process.kill(-pid, 'SIGTERM');
    } catch {
      // already gone
    }
  }
}

function probeTicks(dir: string, targets: string[]): boolean {
  let text: string;
  try {
    text = readFileSync(path.join(dir, 'ticks.log'), 'utf8');
  } catch {
    return false;
  }
  return targets.every((t) => text.includes(` PROBE ${t} `));
}

async function agentAnswers(env: LabEnv, name: string): Promise<boolean> {
  return virsh(env, ['qemu-agent-command', '--timeout', '3', name, '{"execute":"guest-ping"}']).then(
    () => true,
    () => false,
  );
}

async function waitUntil(what: string, probe: () => Promise<boolean>, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!(await probe().catch(() => false))) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

function domainXml(
  name: string,
  images: string[],
  targets: string[],
  dir: string,
  memoryMiB: number,
  p: { kernel: string; initrd: string; secret: string; auth: string; conf: string },
): string {
  const disks = images
    .map(
      (image, i) => `    <disk type='network' device='disk'>
      <driver name='qemu' type='raw' cache='writeback'/>
      <source protocol='rbd' name='${image}'>
        <config file='${p.conf}'/>
        <auth username='${p.auth}'><secret type='ceph' uuid='${p.secret}'/></auth>
      </source>
      <target dev='${targets[i]}' bus='virtio'/>
      <serial>${targets[i]}</serial>
    </disk>`,
    )
    .join('\n');
  return `<domain type='qemu'>
  <name>${name}</name>
  <memory unit='MiB'>${memoryMiB}</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>${p.kernel}</kernel>
    <initrd>${p.initrd}</initrd>
    <cmdline>console=ttyS0 quiet 8250.nr_uarts=1 vmsnap.agent=1</cmdline>
  </os>
  <features><acpi/></features>
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
${disks}
    <channel type='unix'>
      <source mode='bind'/>
      <target type='virtio' name='org.qemu.guest_agent.0'/>
    </channel>
    <channel type='unix'>
      <source mode='bind' path='${dir}/ctl.sock'/>
      <target type='virtio' name='org.vmsnap.ctl.0'/>
    </channel>
    <serial type='file'>
      <source path='${dir}/serial.log' append='off'/>
      <target port='0'/>
    </serial>
    <console type='file'>
      <source path='${dir}/serial.log' append='off'/>
      <target type='serial' port='0'/>
    </console>
    <controller type='usb' model='none'/>
    <memballoon model='none'/>
  </devices>
</domain>
`;
}
