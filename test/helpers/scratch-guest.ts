import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { rbd, run, virsh } from '../../support/lab/cli-tools';
import type { LabEnv } from '../../support/lab/env';
import { until } from './until';

/**
 * A throw-away lab guest of a test's own, on host A: the lab guests' kernel and initramfs (so the
 * same init, qemu-ga, fsfreeze hook and freeze probe) and one fresh 64 MiB ext4 RBD data disk.
 * For what must not be done to the shared guests (restarting their agent with other options).
 * `remove()` destroys it and its disk, snapshots included.
 */
export interface ScratchGuest {
  name: string;
  dir: string;
  remove(): Promise<void>;
}

export async function startScratchGuest(env: LabEnv, template: string): Promise<ScratchGuest> {
  const name = `vmsnap-scratch-${randomUUID().slice(0, 8)}`;
  const dir = mkdtempSync(path.join(os.tmpdir(), `${name}-`));
  const image = `${env.pools.vm}/${name}-vdb`;
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
    await rbd(env, ['snap', 'purge', '--no-progress', image]).catch(() => undefined);
    await rbd(env, ['rm', '--no-progress', image]).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const raw = path.join(dir, 'vdb.raw');
    await run('truncate', ['-s', '64M', raw]);
    await run('mkfs.ext4', ['-q', '-F', '-b', '4096', '-L', 'vdb', '-E', 'lazy_itable_init=0,lazy_journal_init=0', raw]);
    await rbd(env, ['import', '--no-progress', '--image-format', '2', raw, image]);
    rmSync(raw);
    const file = path.join(dir, 'domain.xml');
    writeFileSync(file, domainXml(name, image, dir, parts));
    await virsh(env, ['define', file]);
    await virsh(env, ['start', name]);
    await until(`${name}'s agent to answer`, () => agentAnswers(env, name), 120_000, 500);
    return { name, dir, remove: removeAll };
  } catch (err) {
    await removeAll();
    throw err;
  }
}

async function agentAnswers(env: LabEnv, name: string): Promise<boolean> {
  return virsh(env, ['qemu-agent-command', '--timeout', '3', name, '{"execute":"guest-ping"}']).then(
    () => true,
    () => false,
  );
}

function domainXml(name: string, image: string, dir: string, p: { kernel: string; initrd: string; secret: string; auth: string; conf: string }): string {
  return `<domain type='qemu'>
  <name>${name}</name>
  <memory unit='MiB'>256</memory>
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
    <disk type='network' device='disk'>
      <driver name='qemu' type='raw' cache='writeback'/>
      <source protocol='rbd' name='${image}'>
        <config file='${p.conf}'/>
        <auth username='${p.auth}'><secret type='ceph' uuid='${p.secret}'/></auth>
      </source>
      <target dev='vdb' bus='virtio'/>
      <serial>vdb</serial>
    </disk>
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
