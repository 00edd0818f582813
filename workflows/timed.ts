/** Runs a step and records how long it took under `name` (workflow time: deterministic on replay). */
export async function timed<T>(steps: Record<string, number>, name: string, fn: () => Promise<T>): Promise<T> {
  const t0 = Date.now();
  try {
    return await fn();
  } finally {
    steps[name] = Date.now() - t0;
  }
}
