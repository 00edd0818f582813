/** Human output on stdout by default; one JSON document with --json, for schedulers. */
export function emit(json: boolean, value: unknown, human: () => string): void {
  process.stdout.write(json ? JSON.stringify(value, null, 2) + '\n' : human() + '\n');
}

export function progressBar(percent: number, width = 30): string {
  const n = Math.max(0, Math.min(width, Math.round((percent / 100) * width)));
  return `[${'#'.repeat(n)}${'.'.repeat(width - n)}] ${percent.toFixed(0).padStart(3)}%`;
}
