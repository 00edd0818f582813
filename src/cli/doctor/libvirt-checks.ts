import { LibvirtClient, isAuthRefused, parseDomainXml } from '../../libvirt';
import type { DomainRef } from '../../libvirt';
import { readOnlyLibvirtUri } from '../../config';
import type { Config } from '../../config';
import { FreezeGuard } from '../../safety/freeze-guard';
import { fail, messageOf, ok, refused, warn, within } from './check';
import type { CheckResult } from './check';

const AGENT_CHANNEL_HINT =
  "add <channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0'/></channel> to the domain and install qemu-guest-agent in the guest";

/** The default freeze deadline (10 s) plus slack: a guest frozen this long is not in a normal snapshot window. */
const STUCK_FREEZE_MS = 12_000;

export interface LibvirtFindings {
  checks: CheckResult[];
  /** Pools holding the checked domains' RBD disks, for the Ceph checks. */
  sourcePools: string[];
  /** The checked domains' RBD disks, for the DR checks. */
  rbdDisks: DomainRbdDisk[];
}

export interface DomainRbdDisk {
  domain: string;
  target: string;
  pool: string;
  namespace: string;
  image: string;
}

/**
 * libvirtd reachable at the configured URI; for each running domain (or each --domain): its guest
 * agent answers guest-ping within the timeout and is not left frozen, and its disks are RBD.
 */
export async function checkLibvirt(config: Config, opts: { domains?: string[]; agentTimeoutSec: number }): Promise<LibvirtFindings> {
  const uri = config.libvirt.uri;
  let lv: LibvirtClient;
  try {
    lv = await within(10_000, 'connect', LibvirtClient.connect({ uri, callTimeoutMs: 10_000 }));
  } catch (err) {
    return { checks: [connectFailed('libvirt', uri, err)], sourcePools: [], rbdDisks: [] };
  }
  try {
    const checks: CheckResult[] = [];
    const pools = new Set<string>();
    const rbdDisks: DomainRbdDisk[] = [];
    let doms: DomainRef[];
    try {
      doms = opts.domains?.length ? await lookup(lv, opts.domains, checks) : await lv.listDomains();
    } catch (err) {
      return { checks: [fail('libvirt', `connected to ${uri} but cannot list domains: ${messageOf(err)}`, 'check libvirt access rights for this user')], sourcePools: [], rbdDisks: [] };
    }
    checks.unshift(ok('libvirt', `connected to ${uri}; ${doms.length} domain(s) to check`), await checkReadOnly(config), await checkGuard(config));
    for (const dom of doms) checks.push(...(await checkDomain(lv, dom, opts.agentTimeoutSec, pools, rbdDisks)));
    return { checks, sourcePools: [...pools].sort(), rbdDisks };
  } finally {
    await lv.close();
  }
}

/**
 * An authentication refusal is not a daemon that is down: its hint is the auth setting that
 * refused (from LibvirtAuthError), not "start libvirtd", and doctor exits 6 instead of 4.
 */
function connectFailed(name: string, uri: string, err: unknown): CheckResult {
  if (isAuthRefused(err)) return refused(name, `${uri} refused authentication: ${err.reason}`, err.fix);
  return fail(name, `cannot connect to ${uri}: ${messageOf(err)}`, 'start libvirtd, or set --libvirt-uri / VMSNAP_LIBVIRT_URI (qemu:///system?socket=PATH)', true);
}

/**
 * The freeze guard's watchdog is what thaws a guest when everything else is gone: a worker image
 * that cannot run it has no guard at all. Runs the very command a freeze spawns, in check mode.
 */
async function checkGuard(config: Config): Promise<CheckResult> {
  try {
    const out = await new FreezeGuard({ libvirtUri: config.libvirt.uri, stateDir: config.stateDir }).check();
    return ok('freeze guard', out);
  } catch (err) {
    return fail('freeze guard', `the freeze guard's watchdog cannot run: ${messageOf(err)}`, 'the worker host needs node and vmsnap installed as the worker runs them, and read-write access to libvirtd');
  }
}

/** Inspection runs on libvirtd's read-only socket, so the worker needs that one too. */
async function checkReadOnly(config: Config): Promise<CheckResult> {
  const uri = readOnlyLibvirtUri(config);
  try {
    const ro = await within(10_000, 'connect', LibvirtClient.connect({ uri, readOnly: true, callTimeoutMs: 10_000 }));
    await ro.listDomains().finally(() => ro.close());
    return ok('libvirt read-only', `read-only connection works (${uri})`);
  } catch (err) {
    if (isAuthRefused(err)) return refused('libvirt read-only', `${uri} refused authentication (${err.scheme})`, err.fix);
    return fail('libvirt read-only', `cannot open a read-only connection via ${uri}: ${messageOf(err)}`, "inspection uses libvirtd's read-only socket (libvirt-sock-ro beside the read-write one): check its permissions, or set VMSNAP_LIBVIRT_RO_URI");
  }
}

async function lookup(lv: LibvirtClient, names: string[], checks: CheckResult[]): Promise<DomainRef[]> {
  const out: DomainRef[] = [];
  for (const n of names) {
    try {
      const dom = await lv.lookupDomain(n);
      const { state } = await lv.getDomainState(dom);
      if (state === 'running') out.push(dom);
      else checks.push(fail(`domain ${n}`, `is ${state}`, `start it (virsh start ${n}); vmsnap snapshots running domains`));
    } catch (err) {
      checks.push(fail(`domain ${n}`, messageOf(err), 'check the name with virsh list --all'));
    }
  }
  return out;
}

async function checkDomain(lv: LibvirtClient, dom: DomainRef, agentTimeoutSec: number, pools: Set<string>, rbdDisks: DomainRbdDisk[]): Promise<CheckResult[]> {
  let info;
  try {
    info = parseDomainXml(await lv.getDomainXml(dom));
  } catch (err) {
    return [fail(`domain ${dom.name}`, `cannot read its XML: ${messageOf(err)}`, 'check libvirt access rights')];
  }
  for (const d of info.disks) {
    if (d.device === 'disk' && d.rbd) rbdDisks.push({ domain: dom.name, target: d.target, pool: d.rbd.pool, namespace: d.rbd.namespace ?? '', image: d.rbd.image });
  }
  return [await checkAgent(lv, dom, info.hasAgentChannel, agentTimeoutSec), checkDisks(dom.name, info.disks, pools)];
}

async function checkAgent(lv: LibvirtClient, dom: DomainRef, hasChannel: boolean, timeoutSec: number): Promise<CheckResult> {
  const name = `domain ${dom.name} agent`;
  if (!hasChannel) return warn(name, 'no guest agent channel: its snapshots can only be crash-consistent', AGENT_CHANNEL_HINT);
  try {
    await lv.guestPing(dom, timeoutSec, { timeoutMs: timeoutSec * 1000 + 5000 });
  } catch (err) {
    return fail(name, `guest-ping got no answer within ${timeoutSec}s: ${messageOf(err)}`, 'start qemu-guest-agent in the guest (systemctl start qemu-guest-agent)');
  }
  try {
    // A snapshot's freeze lasts at most its deadline (default 10 s): only a longer one is stuck.
    const since = Date.now();
    for (;;) {
      const status = await lv.fsFreezeStatus(dom, timeoutSec, { timeoutMs: timeoutSec * 1000 + 5000 });
      if (status === 'thawed') break;
      if (Date.now() - since > STUCK_FREEZE_MS) {
        return fail(name, `answers, but its filesystems have been FROZEN for over ${STUCK_FREEZE_MS / 1000}s`, `vmsnap thaw ${dom.name}`);
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
  } catch (err) {
    return warn(name, `answers guest-ping, but guest-fsfreeze-status failed: ${messageOf(err)}`, 'check the agent allows guest-fsfreeze-* (no --blacklist/--block-rpcs)');
  }
  return ok(name, 'answers guest-ping; filesystems thawed');
}

function checkDisks(domain: string, disks: ReturnType<typeof parseDomainXml>['disks'], pools: Set<string>): CheckResult {
  const name = `domain ${domain} disks`;
  const rbd = disks.filter((d) => d.device === 'disk' && d.rbd);
  const other = disks.filter((d) => d.device === 'disk' && !d.rbd);
  for (const d of rbd) pools.add(d.rbd!.pool);
  const list = rbd.map((d) => `${d.target}=${d.rbd!.pool}/${d.rbd!.image}`).join(', ');
  if (!rbd.length) return warn(name, `no RBD disk (${other.map((d) => `${d.target}: ${d.type}`).join(', ') || 'no disks'})`, 'vmsnap snapshots RBD-backed disks only');
  if (other.length) {
    return warn(name, `RBD: ${list}; not RBD: ${other.map((d) => `${d.target} (${d.type})`).join(', ')}`, 'snapshot with --skip-non-rbd or --disk to cover the RBD disks only');
  }
  return ok(name, `RBD: ${list}`);
}
