import type { CliError } from './exit-codes';

let documents = 0;

/** Human output on stdout by default; one JSON document with --json, for schedulers. */
export function emit(json: boolean, value: unknown, human: () => string): void {
  if (json) documents++;
  process.stdout.write(json ? JSON.stringify(value, null, 2) + '\n' : human() + '\n');
}

/**
 * With --json, an error is the command's one document: `{"error":{type,message,exitCode}}` on
 * stdout (the message goes to stderr as well, for logs). Not when the command already printed
 * its document: stdout never holds two.
 */
export function emitError(json: boolean, err: CliError): void {
  process.stderr.write(`vmsnap: ${err.message}\n`);
  if (!json || documents > 0) return;
  documents++;
  process.stdout.write(JSON.stringify({ error: { type: err.type, message: err.message, exitCode: err.exitCode } }, null, 2) + '\n');
}

export function progressBar(percent: number, width = 30): string {
  const n = Math.max(0, Math.min(width, Math.round((percent / 100) * width)));
  return `[${'#'.repeat(n)}${'.'.repeat(width - n)}] ${percent.toFixed(0).padStart(3)}%`;
}
