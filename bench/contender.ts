/** What each freeze-window contender reports for one run. */
import { backToBack, windowBreakdown } from '../src/model/freeze-window';
import type { Guest, LabContext } from './lab-context';

export type ContenderName = 'floor' | 'naive' | 'nova' | 'vmsnap';
export const CONTENDERS: readonly ContenderName[] = ['floor', 'naive', 'nova', 'vmsnap'];

export interface RunTiming {
  /** Host clock (ms since epoch): freeze call start and thaw call return. */
  freezeStartMs: number;
  thawReturnMs: number;
  /** freeze call start → thaw call return, as the contender measured it. */
  hostWindowMs: number;
  /** Where the window went (ms): freeze call, snapshot(s), clone/flatten (Nova), thaw call, the rest. */
  breakdown: Record<string, number>;
  /** The host interval in which to look for the guest's longest stall (default freeze → thaw). */
  probeFromMs?: number;
  probeToMs?: number;
  /** Contender-specific figures (vmsnap: end-to-end and step times). */
  extra?: Record<string, unknown>;
}

export interface Contender {
  readonly name: ContenderName;
  /** One run against `guest`; must leave the guest thawed and remove what it created. */
  run(guest: Guest, tag: string): Promise<RunTiming>;
}

export interface ContenderDeps {
  ctx: LabContext;
}

/** A contender's window timed by a clock read after each call (src/model/freeze-window.ts). */
export function timingOf(freezeStartMs: number, marks: readonly (readonly [string, number])[]): RunTiming {
  const b = windowBreakdown(backToBack(freezeStartMs, marks));
  return { freezeStartMs, thawReturnMs: freezeStartMs + b.windowMs, hostWindowMs: b.windowMs, breakdown: { ...b.calls, gaps: b.gaps } };
}
