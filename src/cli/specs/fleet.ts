import { HELP, TEMPORAL_COMMAND } from '../options';
import type { CommandSpec } from '../options';

const OPTIONS = { ...TEMPORAL_COMMAND, ...HELP } as const;

export const FLEET_HOSTS = {
  name: 'fleet hosts',
  usage: ['[options]'],
  summary: "each host's state: alive, draining, late or lost; last heard; its VMs",
  about: `Each host's state: alive, draining (its worker stopped cleanly), late (beats missing) or lost,
when it was last heard and the VMs it ran.`,
  options: OPTIONS,
} as const satisfies CommandSpec;

export const FLEET_FORGET = {
  name: 'fleet forget',
  usage: ['<host> [options]'],
  summary: 'retire a host whose worker is gone for good',
  about: `Retires a host whose worker is gone for good (decommissioned, renamed). Until a host is lost
(fleetHostLostAfterMs of silence, 3x that after a clean stop) its silence leaves "not running
anywhere" unsure: runs of a VM no live host runs fail DomainNotPlaced (retryable), and restores of
a shut-off VM wait. Refused while the host still beats. A retired host that starts its worker
again rejoins. With no worker answering, the request waits in the host's entry for the next one.`,
  options: OPTIONS,
} as const satisfies CommandSpec;

export const FLEET = {
  name: 'fleet',
  usage: ['hosts|forget <host> [options]'],
  summary: "the fleet registry: each host's state; retire a host gone for good",
  about: `The fleet index: every host whose worker announced itself in the last day (one entry workflow
per host, vmsnap-host-<host>).`,
  options: { ...HELP },
  subcommands: { hosts: FLEET_HOSTS, forget: FLEET_FORGET },
} as const satisfies CommandSpec;
