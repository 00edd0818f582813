/** Exit codes schedulers can branch on. */
export const Exit = {
  ok: 0,
  /** The run failed (its failure type is printed). */
  failed: 1,
  /** Bad flags or input: nothing was started, nothing changed. */
  badInput: 2,
  /** The run was cancelled. */
  cancelled: 3,
  /** Temporal, libvirt or Ceph could not be reached, or the Temporal namespace is not prepared (`vmsnap setup`). */
  unreachable: 4,
  /** The run was terminated or timed out. */
  terminated: 5,
  /**
   * libvirtd answered but did not let vmsnap in: a refused polkit check, or an auth scheme vmsnap
   * does not implement (SASL). Not "unreachable": starting anything will not help; its config will.
   */
  authRefused: 6,
} as const;

export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}
