import type { CheckResult } from '../doctor/check';
import { checkCeph } from '../doctor/ceph-checks';
import { checkDr } from '../doctor/dr-checks';
import { checkLibvirt } from '../doctor/libvirt-checks';
import { checkTemporal } from '../doctor/temporal-checks';
import { configFrom } from '../config-flags';
import { parseCommand } from '../options';
import { DOCTOR } from '../specs/doctor';
import { CliError, Exit } from '../exit-codes';
import { emit } from '../output';
import { RBD_NAME } from '../../model/input';
import { VERSION } from '../../version';
import { ok } from '../doctor/check';

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommand(DOCTOR, argv);
  if (!parsed) return Exit.ok;
  const { values } = parsed;
  if (parsed.positionals.length) throw new CliError('doctor takes no arguments; name domains with --domain (see --help)', Exit.badInput);
  const timeoutSec = (parsed.ms['agent-timeout'] ?? 5000) / 1000;
  const config = configFrom(values);
  const imagePool = values['image-pool'] ?? config.imagePool;
  if (!RBD_NAME.test(imagePool)) throw new CliError(`invalid --image-pool "${imagePool}"`, Exit.badInput);

  const [temporal, libvirt] = await Promise.all([
    checkTemporal(config, { fix: !!values.fix }),
    checkLibvirt(config, { domains: values.domain, agentTimeoutSec: timeoutSec }),
  ]);
  const pools = [...new Set([imagePool, ...libvirt.sourcePools])];
  // The version first: a report pasted into a ticket says which vmsnap wrote it.
  const checks = [ok('vmsnap', `version ${VERSION}`), ...temporal, ...libvirt.checks, ...(await checkCeph(config, pools)), ...(await checkDr(config, libvirt.rbdDisks))];

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
