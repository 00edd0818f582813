import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import { SEARCH_ATTRIBUTE_TYPES } from '../../src/model/search-attributes';
import { cliEnv, json, vmsnapCli } from '../helpers/cli';
import { startHarness, uniqueId } from '../helpers/harness';
import type { Harness } from '../helpers/harness';
import { need } from '../../support/lab/env';

/*
 * `vmsnap doctor` as an operator runs it: the real CLI against the lab's Temporal, libvirtd,
 * guests and Ceph (with the restricted client.vmsnap key), with a real worker on the queue.
 */

interface Check {
  name: string;
  status: 'ok' | 'warn' | 'fail';
  detail: string;
  fix?: string;
  unreachable?: boolean;
}
interface Report {
  ok: boolean;
  checks: Check[];
}

let h: Harness;
let env: NodeJS.ProcessEnv;
let g1: string;
let g3: string;
let noagent: string;
const scratchNamespace = uniqueId('vmsnap-doctor');
let temporal: Connection | undefined;

const doctor = (...argv: string[]) => vmsnapCli(['doctor', '--host', h.config.host, ...argv], env, 60_000);
const byName = (r: Report, name: string) => r.checks.find((c) => c.name === name);

beforeAll(async () => {
  h = await startHarness({ host: uniqueId('doctor') });
  env = cliEnv(h.vars);
  g1 = need(h.vars, 'VMSNAP_GUEST_1DISK');
  g3 = need(h.vars, 'VMSNAP_GUEST_3DISK');
  noagent = need(h.vars, 'VMSNAP_GUEST_NOAGENT');
});

afterAll(async () => {
  if (temporal) {
    await temporal.operatorService.deleteNamespace({ namespace: scratchNamespace }).catch(() => undefined);
    await temporal.close();
  }
  await h?.stop();
});

describe('vmsnap doctor on the lab', () => {
  it('passes: every service, search attribute, worker, guest agent and pool checked', async () => {
    const r = await doctor('--json');
    const report = json<Report>(r);
    const failed = report.checks.filter((c) => c.status === 'fail');
    expect(failed, JSON.stringify(failed)).toEqual([]);
    expect(r.code).toBe(0);
    expect(report.ok).toBe(true);

    expect(byName(report, 'temporal')?.status).toBe('ok');
    expect(byName(report, 'temporal.search-attributes')).toMatchObject({ status: 'ok', detail: Object.keys(SEARCH_ATTRIBUTE_TYPES).join(', ') });
    expect(byName(report, 'temporal.worker')).toMatchObject({ status: 'ok' });
    expect(byName(report, 'temporal.worker')!.detail).toContain(h.hw.taskQueue);
    expect(byName(report, 'temporal.worker.bulk')).toMatchObject({ status: 'ok' });
    expect(byName(report, 'temporal.worker.bulk')!.detail).toContain(`${h.hw.taskQueue}-bulk`);
    expect(byName(report, 'libvirt')?.status).toBe('ok');
    expect(byName(report, 'libvirt read-only')?.status).toBe('ok');
    // The watchdog that thaws when everything else is gone, run exactly as a freeze spawns it.
    expect(byName(report, 'freeze guard')).toMatchObject({ status: 'ok', detail: expect.stringMatching(/^watchdog ok: .*libvirt reachable$/) });
    for (const g of [g1, g3]) {
      expect(byName(report, `domain ${g} agent`)).toMatchObject({ status: 'ok', detail: 'answers guest-ping; filesystems thawed' });
      expect(byName(report, `domain ${g} disks`)?.status).toBe('ok');
    }
    // The agent-less guest is reported, with the fix, but is not a failure: its snapshots are crash-consistent.
    expect(byName(report, `domain ${noagent} agent`)).toMatchObject({ status: 'warn' });
    expect(byName(report, `domain ${noagent} agent`)!.fix).toMatch(/org\.qemu\.guest_agent\.0/);
    expect(byName(report, 'ceph')).toMatchObject({ status: 'ok' });
    expect(byName(report, 'ceph')!.detail).toContain('client.vmsnap');
    expect(byName(report, 'ceph pool images')?.status).toBe('ok');
    expect(byName(report, 'ceph pool vms')?.status).toBe('ok');
  });

  it('prints one line per check with OK/WARN/FAIL', async () => {
    const r = await doctor('--domain', g1);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines.slice(0, -1).every((l) => /^(OK {2}|WARN|FAIL) {2}\S/.test(l))).toBe(true);
    expect(r.stdout).toMatch(new RegExp(`^OK {4}domain ${g1} agent: answers guest-ping`, 'm'));
    expect(r.stdout).not.toMatch(new RegExp(`domain ${g3}`));
    expect(lines.at(-1)).toMatch(/^\d+ ok, \d+ warning\(s\), 0 failed$/);
  });

  it('fails clearly against a bogus libvirt URI (exit 4), still checking the rest', async () => {
    const sock = '/nonexistent/libvirt-sock';
    const r = await doctor('--libvirt-uri', `qemu:///system?socket=${sock}`);
    expect(r.code).toBe(4);
    expect(r.stdout).toMatch(new RegExp(`^FAIL {2}libvirt: cannot connect to qemu:///system\\?socket=${sock}: .*ENOENT.* — fix: start libvirtd, or set --libvirt-uri`, 'm'));
    expect(r.stdout).toMatch(/^OK {4}temporal: reachable/m);
    expect(r.stdout).toMatch(/^OK {4}ceph: connected/m);
  });

  it('reports an unknown domain and an unreachable Temporal', async () => {
    const unknown = await doctor('--domain', 'no-such-domain', '--json');
    expect(unknown.code).toBe(1);
    expect(byName(json<Report>(unknown), 'domain no-such-domain')).toMatchObject({ status: 'fail' });

    const r = await doctor('--temporal-address', '127.0.0.1:1', '--domain', g1);
    expect(r.code).toBe(4);
    expect(r.stdout).toMatch(/^FAIL {2}temporal: cannot reach 127\.0\.0\.1:1: .* — fix: start the Temporal server/m);
  });

  it('refuses bad flags with exit 2, before checking anything', async () => {
    for (const argv of [['--bogus'], ['--agent-timeout-s', '0'], ['stray-arg'], ['--image-pool', 'a/b']]) {
      const r = await doctor(...argv);
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(/^vmsnap: /);
    }
    expect((await doctor('--help')).stdout).toMatch(/^Usage: vmsnap doctor/);
  });

  it('finds missing search attributes in a namespace and registers them with --fix', async () => {
    temporal = await Connection.connect({ address: need(h.vars, 'TEMPORAL_ADDRESS') });
    await temporal.workflowService.registerNamespace({ namespace: scratchNamespace, workflowExecutionRetentionPeriod: msToTs('1 day') });
    const ns = ['--namespace', scratchNamespace, '--domain', g1, '--json'];

    const before = await doctor(...ns);
    expect(before.code).toBe(1);
    const missing = byName(json<Report>(before), 'temporal.search-attributes')!;
    expect(missing).toMatchObject({ status: 'fail', detail: `missing: ${Object.keys(SEARCH_ATTRIBUTE_TYPES).join(', ')}` });
    expect(missing.fix).toMatch(/vmsnap doctor --fix/);

    const fixed = await doctor(...ns, '--fix');
    expect(byName(json<Report>(fixed), 'temporal.search-attributes')).toMatchObject({ status: 'ok', detail: expect.stringMatching(/^registered .* \(--fix\)$/) });
    expect(fixed.code, fixed.stdout).toBe(0);

    const after = await doctor(...ns);
    expect(byName(json<Report>(after), 'temporal.search-attributes')?.status).toBe('ok');
    expect(after.code, after.stdout).toBe(0);
  });
});
