/**
 * Exit codes schedulers can branch on. This table is the only list: `vmsnap --help` prints it,
 * docs/operations.md repeats it word for word (test/unit/cli-options.test.ts compares them), and
 * every command's errors carry one of these codes.
 */
export const EXIT_CODES = [
  { code: 0, key: 'ok', type: 'Ok', meaning: 'ok' },
  { code: 1, key: 'failed', type: 'Failed', meaning: 'the run or the operation failed (its failure type is printed)' },
  { code: 2, key: 'badInput', type: 'BadInput', meaning: 'bad flags or input, or a request vmsnap refuses: nothing was started or changed' },
  { code: 3, key: 'cancelled', type: 'Cancelled', meaning: 'the run was cancelled' },
  {
    code: 4,
    key: 'unreachable',
    type: 'Unreachable',
    meaning: 'Temporal, libvirt or Ceph could not be reached, or the Temporal namespace is not prepared (`vmsnap setup`)',
  },
  { code: 5, key: 'terminated', type: 'TimedOut', meaning: 'the run timed out or was terminated' },
  {
    code: 6,
    key: 'authRefused',
    type: 'PermissionDenied',
    meaning:
      'a service answered but refused vmsnap: libvirtd did not authenticate it (polkit said no, or SASL is configured), Temporal denied the call (PERMISSION_DENIED, UNAUTHENTICATED), or the cephx key lacks the capability (EPERM, EACCES)',
  },
] as const;

type Key = (typeof EXIT_CODES)[number]['key'];

export const Exit = Object.fromEntries(EXIT_CODES.map((e) => [e.key, e.code])) as { readonly [K in Key]: Extract<(typeof EXIT_CODES)[number], { key: K }>['code'] };

/** The error type a code stands for when nothing more precise is known. */
export function exitType(code: number): string {
  return EXIT_CODES.find((e) => e.code === code)?.type ?? 'Failed';
}

export class CliError extends Error {
  /** What went wrong, for scripts (`--json`'s error.type): e.g. `SetInUse`; by default the code's type. */
  readonly type: string;

  constructor(
    message: string,
    readonly exitCode: number,
    type?: string,
  ) {
    super(message);
    this.type = type ?? exitType(exitCode);
  }
}

/** The exit code table as `vmsnap --help` shows it. */
export function exitCodeHelp(): string {
  return `Exit codes:\n${EXIT_CODES.map((e) => `  ${e.code}  ${e.meaning.replace(/`/g, '')}`).join('\n')}`;
}
