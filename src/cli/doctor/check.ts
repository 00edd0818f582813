/** One line of `vmsnap doctor`. */
export interface CheckResult {
  name: string;
  status: 'ok' | 'warn' | 'fail';
  detail: string;
  /** What to do about a warn or fail. */
  fix?: string;
  /** The service could not be reached at all (exit code 4). */
  unreachable?: boolean;
  /** The service answered and refused to authenticate vmsnap (exit code 6). */
  authRefused?: boolean;
}

export const ok = (name: string, detail: string): CheckResult => ({ name, status: 'ok', detail });
export const warn = (name: string, detail: string, fix: string): CheckResult => ({ name, status: 'warn', detail, fix });
export const fail = (name: string, detail: string, fix: string, unreachable = false): CheckResult => ({
  name,
  status: 'fail',
  detail,
  fix,
  ...(unreachable ? { unreachable } : {}),
});

/** A service that answered and refused vmsnap's credentials: its fix is configuration, not "start it". */
export const refused = (name: string, detail: string, fix: string): CheckResult => ({ name, status: 'fail', detail, fix, authRefused: true });

/** Bounds a probe so doctor always finishes, even against a hung daemon. */
export async function within<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
