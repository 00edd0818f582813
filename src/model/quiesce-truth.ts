import { FailureType } from './failures';
import type { FreezeResult, SnapshotDisksResult, ThawResult } from './types';

/**
 * Whether a snapshot may be called quiesced. Pure, so the workflow, the bench and the tests judge
 * with the same rules. A snapshot is quiesced only when its freeze provably held from the freeze
 * call to the run's own thaw, which proves it three ways:
 *   - the host guard did not fire (it thaws at the deadline);
 *   - thaw start − freeze start ≤ the deadline on the monotonic clock (a wall-clock step cannot
 *     hide an overrun, and a sweeper that already cleared the guard's marker cannot either);
 *   - the run's own thaw thawed exactly as many filesystems as its freeze froze (virDomainFSThaw
 *     returns 0 when somebody — an operator's `vmsnap thaw`, `virsh domfsthaw`, the guard —
 *     thawed first).
 */
export type QuiesceVerdict =
  | { quiesced: true; reason: string }
  | {
      quiesced: false;
      reason: string;
      failure: typeof FailureType.FreezeDeadlineExceeded | typeof FailureType.FreezeInterrupted | typeof FailureType.FreezeHandedOff;
    };

export function judgeFreeze(freeze: FreezeResult, snapshot: SnapshotDisksResult, thaw: ThawResult, deadlineMs: number): QuiesceVerdict {
  const n = freeze.frozenFilesystems;
  if (thaw.handOff) {
    // The guest left frozen and this run did not end the freeze: when it ended is not proven here.
    const how =
      thaw.handOff.outcome === 'resolved'
        ? 'the freeze was ended there by someone other than this run (that host\'s arrival guard or worker, after the deadline, or an operator)'
        : thaw.handOff.outcome === 'nowhere'
          ? 'it then stopped running'
          : 'its thaw there is not proven yet; the hand-off goes on';
    return {
      quiesced: false,
      reason: `the guest migrated to another host while frozen and ${how} (${thaw.handOff.workflowId}): the window's end is unknown`,
      failure: FailureType.FreezeHandedOff,
    };
  }
  if (thaw.guardFiredAt) {
    return {
      quiesced: false,
      reason: `freeze outlived its ${deadlineMs} ms deadline; the host guard thawed the guest`,
      failure: FailureType.FreezeDeadlineExceeded,
    };
  }
  if (freeze.startedMono !== undefined && thaw.startedMono !== undefined) {
    const held = thaw.startedMono - freeze.startedMono;
    if (held > deadlineMs) {
      return {
        quiesced: false,
        reason: `the freeze window lasted ${Math.round(held)} ms, past its ${deadlineMs} ms deadline (monotonic clock)`,
        failure: FailureType.FreezeDeadlineExceeded,
      };
    }
    if (snapshot.returnedMono !== undefined && snapshot.returnedMono > thaw.startedMono) {
      return { quiesced: false, reason: 'the snapshot returned after the thaw started', failure: FailureType.FreezeInterrupted };
    }
  }
  if (thaw.thawedOn && thaw.startedMono === undefined) {
    // Thawed on the host the guest migrated to: the two hosts' monotonic clocks are unrelated,
    // so the window is measured on the wall clocks (both hosts keep NTP time).
    const held = thaw.startedAt - freeze.startedAt;
    if (held > deadlineMs) {
      return {
        quiesced: false,
        reason: `the freeze window lasted ${Math.round(held)} ms (the guest migrated to ${thaw.thawedOn} while frozen), past its ${deadlineMs} ms deadline`,
        failure: FailureType.FreezeDeadlineExceeded,
      };
    }
  }
  if (thaw.thawedFilesystems !== n) {
    return {
      quiesced: false,
      reason:
        `the run's own thaw thawed ${thaw.thawedFilesystems} of the ${n} filesystem(s) its freeze froze: ` +
        'something else thawed the guest inside the window',
      failure: FailureType.FreezeInterrupted,
    };
  }
  return { quiesced: true, reason: `guest agent froze ${n} filesystem(s) for the snapshot` };
}
