import { describe, expect, it } from 'vitest';
import { agentCommand, CliError, virsh } from '../../support/lab/cli-tools';
import { loadLabEnv } from '../../support/lab/env';
import { ctlSocketPath, guestCtl } from '../../support/lab/guest-ctl';
import { readTicks } from '../../support/lab/probe';

// The lab's guests (lab/guests.sh), seen through libvirt, the guest agent and the control channel.
const env = loadLabEnv();
const guests = env.guests;
if (!guests || !env.libvirt) throw new Error(`the lab env in ${env.dir} has no guests: run npm run lab:up`);
const agentGuests = [guests.oneDisk, guests.threeDisk];

async function diskTargets(domain: string): Promise<string[]> {
  const { stdout } = await virsh(env, ['domblklist', domain]);
  return [...stdout.matchAll(/^\s*(vd[a-z]+)\s+\S+/gm)].map((m) => m[1] as string);
}

describe('lab guests', () => {
  it('libvirt lists every guest as running', async () => {
    const { stdout } = await virsh(env, ['list', '--name', '--state-running']);
    const running = stdout.split('\n').map((s) => s.trim());
    for (const name of guests.all) expect(running).toContain(name);
    expect(guests.all).toEqual(expect.arrayContaining([guests.oneDisk, guests.threeDisk, guests.noAgent]));
  });

  it('has the data disks the guests are named for, as RBD images in the vm pool', async () => {
    expect(await diskTargets(guests.oneDisk)).toEqual(['vdb']);
    expect(await diskTargets(guests.threeDisk)).toEqual(['vdb', 'vdc', 'vdd']);
    expect(await diskTargets(guests.noAgent)).toEqual(['vdb']);
    const { stdout } = await virsh(env, ['domblklist', guests.threeDisk]);
    expect(stdout).toContain(`${env.pools.vm}/${guests.threeDisk}-vdc`);
  });

  it.each(agentGuests)('%s answers guest-ping through libvirt', async (domain) => {
    expect(await agentCommand(env, domain, 'guest-ping')).toEqual({});
    expect(await agentCommand(env, domain, 'guest-fsfreeze-status')).toBe('thawed');
  });

  it('the no-agent guest has no agent channel, and libvirt says so', async () => {
    const { stdout } = await virsh(env, ['dumpxml', guests.noAgent]);
    expect(stdout).not.toContain('org.qemu.guest_agent.0');
    expect(stdout).toContain('org.vmsnap.ctl.0');
    const err = await agentCommand(env, guests.noAgent, 'guest-ping').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(CliError);
    expect((err as CliError).stderr).toMatch(/guest agent is not configured/i);
  });

  it.each([
    [guests.oneDisk, ['vdb']],
    [guests.threeDisk, ['vdb', 'vdc', 'vdd']],
    [guests.noAgent, ['vdb']],
  ] as const)('%s answers on its control channel and its probe ticks on every disk', async (domain, disks) => {
    const reply = await guestCtl(ctlSocketPath(guests.probeDir, domain), { command: 'status' });
    expect(reply.ok).toBe(true);
    const on = disks.map((d) => `${d}:on`).join(' ');
    expect(reply.detail).toContain(`probe=[${on}]`);
    expect(reply.detail).toContain(`sync=[${on}]`); // probe.log is chattr +S: appends are synchronous
    const since = Date.now();
    await new Promise((r) => setTimeout(r, 1500));
    const ticks = await readTicks(domain, since);
    for (const disk of disks) expect(ticks.filter((t) => t.disk === disk).length).toBeGreaterThanOrEqual(3);
  });
});
