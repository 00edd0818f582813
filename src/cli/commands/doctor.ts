import type { CheckResult } from '../doctor/check';
import { checkCeph } from '../doctor/ceph-checks';
import { checkLibvirt } from '../doctor/libvirt-checks';
import { checkTemporal } from '../doctor/temporal-checks';
import { COMMON_HELP, configFrom, parse } from '../common-flags';
import { CliError, Exit } from '../exit-codes';
import { emit } from '../output';
import { RBD_NAME } from '../../model/input';
import { VERSION } from '../../version';
import { ok } from '../doctor/check';

const HELP = `Usage: vmsnap doctor [--fix] [--domain D ...] [--agent-timeout-s N]

Checks what a snapshot needs, one line per check with OK, WARN or FAIL and how to fix it:
  Temporal reachable, namespace, vmsnap's search attributes, a worker on this host's queue;
  libvirt reachable; each running domain's guest agent (guest-ping) and its disks (RBD or not);
  Ceph reachable with the configured id and keyring; the image pool and the disks' pools open.

  --fix                    register missing search attributes, as \`vmsnap setup\` does
  --domain D               check only this domain (repeatable); default: every running domain
  --agent-timeout-s N      guest-ping timeout (default 5)
  --image-pool POOL        the pool flattened images go to (default from config: images)
${COMMON_HELP}

Exit code: 0 when nothing FAILs (WARNs allowed), 1 on a FAIL, 4 when a service is unreachable,
6 when libvirtd refused to authenticate vmsnap (polkit denied, or SASL configured).`;

export async function run(argv: string[]): Promise<number> {
  const { values } = parse(
    argv,
    { fix: { type: 'boolean' }, domain: { type: 'string', multiple: true }, 'agent-timeout-s': { type: 'string' }, 'image-pool': { type: 'string' } },
    false,
  );
  if (values.help) {
    process.stdout.write(HELP + '\n');
    return Exit.ok;
  }
  const timeout = values['agent-timeout-s'] ?? '5';
  if (!/^[1-9][0-9]?$/.test(timeout)) throw new CliError(`--agent-timeout-s expects 1-99 seconds, got "${timeout}"`, Exit.badInput);
  const config = configFrom(values);
  const imagePool = values['image-pool'] ?? config.imagePool;
  if (!RBD_NAME.test(imagePool)) throw new CliError(`invalid --image-pool "${imagePool}"`, Exit.badInput);

  const [temporal, libvirt] = await Promise.all([
    checkTemporal(config, { fix: !!values.fix }),
    checkLibvirt(config, { domains: values.domain, agentTimeoutSec: Number(timeout) }),
  ]);
  const pools = [...new Set([imagePool, ...libvirt.sourcePools])];
  // The version first: a report pasted into a ticket says which vmsnap wrote it.
  const checks = [ok('vmsnap', `version ${VERSION}`), ...temporal, ...libvirt.checks, ...(await checkCeph(config, pools))];

  const failed = checks.filter((c) => c.status === 'fail');
  const code = doctorExitCode(checks);
  emit(!!values.json, { ok: !failed.length, checks }, () => checks.map(line).join('\n') + `\n${summary(checks)}`);
  return code;
}

/** 4 when a service is down beats 6 (a refusal is only seen once the service answers), beats 1. */
export function doctorExitCode(checks: readonly CheckResult[]): number {
  if (checks.some((c) => c.unreachable)) return Exit.unreachable;
  if (checks.some((c) => c.authRefused)) return Exit.authRefused;
  return checks.some((c) => c.status === 'fail') ? Exit.failed : Exit.ok;
}

function line(c: CheckResult): string {
  const tag = { ok: 'OK  ', warn: 'WARN', fail: 'FAIL' }[c.status];
  return `${tag}  ${c.name}: ${c.detail}${c.fix ? ` — fix: ${c.fix}` : ''}`;
}

function summary(checks: CheckResult[]): string {
  const n = (s: CheckResult['status']) => checks.filter((c) => c.status === s).length;
  return `${n('ok')} ok, ${n('warn')} warning(s), ${n('fail')} failed`;
}
