/** Structured JSON logs, one object per line. Context (workflow id, domain, phase) rides in attrs. */
export interface Logger {
  info(msg: string, attrs?: Record<string, unknown>): void;
  warn(msg: string, attrs?: Record<string, unknown>): void;
  error(msg: string, attrs?: Record<string, unknown>): void;
  debug(msg: string, attrs?: Record<string, unknown>): void;
}

export function jsonLogger(base: Record<string, unknown> = {}, out: NodeJS.WritableStream = process.stderr): Logger {
  const emit = (level: string) => (msg: string, attrs?: Record<string, unknown>) => {
    out.write(JSON.stringify({ ts: new Date().toISOString(), level, msg, ...base, ...attrs }) + '\n');
  };
  return { info: emit('info'), warn: emit('warn'), error: emit('error'), debug: emit('debug') };
}
