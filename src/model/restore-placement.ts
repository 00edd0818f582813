import { FailureType } from './failures';
import { silentHosts } from './fleet';
import type { Presence } from './fleet';

/**
 * Where a restore runs, judged from every live host's answer about the VM's UUID (never its name:
 * a name can be reused by another VM, a UUID cannot).
 *
 * In place: on the host where the VM is — running there only with --stop (its own host stops it);
 * a VM running anywhere is never restored from a stale shut-off definition on another host.
 * As a new VM: on the host named by the caller, else beside the source VM when its memory fits
 * there, else on the answering host with the most room for it (`roomKiB`: available memory minus
 * the host's reserve). A host whose room is unknown (it was not asked) is taken as fitting only
 * beside the source, as before room was asked.
 */
export type RestorePlacement =
  | { ok: true; host: string; taskQueue: string }
  | { ok: false; retry: boolean; type: string; message: string };

export interface RestoreWhere {
  /** The VM the image set was taken of, as its restore record names it. */
  uuid: string;
  name: string;
  mode: 'in-place' | 'as';
  stop: boolean;
  /** The host the caller chose (`--host`), for `--as` only. */
  host?: string;
  /** The memory the new VM needs (its recorded `<memory>`), for `--as` only. */
  needKiB?: number;
}

export function placeRestore(w: RestoreWhere, answers: Presence[], unanswered: string[]): RestorePlacement {
  const found = answers.filter((a): a is Extract<Presence, { found: true }> => a.found && a.uuid === w.uuid);
  const running = found.filter((a) => a.state !== 'shutoff');
  const vm = `${w.name} (${w.uuid})`;
  if (w.mode === 'as') {
    if (w.host) {
      const chosen = answers.find((a) => a.host === w.host);
      if (chosen) return { ok: true, host: chosen.host, taskQueue: chosen.taskQueue };
      return unsure(`host ${w.host} did not answer (or is not a live vmsnap host)`);
    }
    const beside = running[0] ?? found[0];
    if (beside) return besideOrRoomiest(w, beside, answers, unanswered);
    if (unanswered.length) return unsure(`${vm} is on none of the hosts that answered; ${silentHosts(unanswered)}`);
    return {
      ok: false,
      retry: false,
      type: FailureType.DomainNotPlaced,
      message: `${vm} is defined on no live host: name the host for the new VM with --host`,
    };
  }
  if (running.length > 1) {
    return { ok: false, retry: false, type: FailureType.DomainRunning, message: `${vm} is ${running.map((r) => `${r.state} on ${r.host}`).sort().join(' and ')}` };
  }
  if (running.length === 1) {
    const r = running[0];
    if (!w.stop) {
      return { ok: false, retry: false, type: FailureType.DomainRunning, message: `${vm} is ${r.state} on ${r.host}: shut it off first, or pass --stop` };
    }
    return { ok: true, host: r.host, taskQueue: r.taskQueue };
  }
  // Not running on the hosts that answered: one that did not may be running it.
  if (unanswered.length) return unsure(`${vm} is not running on the hosts that answered; ${silentHosts(unanswered)}`);
  if (found.length > 1) {
    return {
      ok: false,
      retry: false,
      type: FailureType.DomainNotPlaced,
      message: `${vm} is defined, shut off, on ${found.map((f) => f.host).sort().join(' and ')}: start it where it belongs, or undefine the stale definition`,
    };
  }
  if (found.length === 1) return { ok: true, host: found[0].host, taskQueue: found[0].taskQueue };
  return { ok: false, retry: false, type: FailureType.DomainNotFound, message: `${vm} exists on none of the live hosts (${sorted(answers.map((a) => a.host))}); a VM of the same name with another UUID is another VM: restore --as a new one` };
}

function fits(a: Presence, needKiB: number | undefined): boolean {
  return needKiB === undefined || a.roomKiB === undefined || a.roomKiB >= needKiB;
}

function besideOrRoomiest(w: RestoreWhere, beside: Presence, answers: Presence[], unanswered: string[]): RestorePlacement {
  if (fits(beside, w.needKiB)) return { ok: true, host: beside.host, taskQueue: beside.taskQueue };
  const need = w.needKiB ?? 0;
  const roomy = answers
    .filter((a): a is Presence & { roomKiB: number } => a.roomKiB !== undefined && a.roomKiB >= need)
    .sort((a, b) => b.roomKiB - a.roomKiB || a.host.localeCompare(b.host));
  if (roomy[0]) return { ok: true, host: roomy[0].host, taskQueue: roomy[0].taskQueue };
  const mib = (kib: number) => `${Math.floor(kib / 1024)} MiB`;
  const seen = sorted(answers.map((a) => `${a.host} ${a.roomKiB === undefined ? 'unknown' : mib(a.roomKiB)}`));
  if (unanswered.length) return unsure(`no host that answered has ${mib(need)} free for a copy of ${w.name} (${seen}); ${silentHosts(unanswered)}`);
  return {
    ok: false,
    retry: false,
    type: FailureType.NoCapacity,
    message: `no live host has ${mib(need)} free for a copy of ${w.name} beyond its reserve (${seen}): free memory, or name a host with --host`,
  };
}

function unsure(message: string): RestorePlacement {
  return { ok: false, retry: true, type: FailureType.DomainNotPlaced, message };
}

function sorted(hosts: string[]): string {
  return [...hosts].sort().join(', ');
}
