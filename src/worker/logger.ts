/** Structured JSON logs, one object per line. Context (workflow id, domain, phase) rides in attrs. */
export interface Logger {
  info(msg: string, attrs?: Record<string, unknown>): void;
  warn(msg: string, attrs?: Record<string, unknown>): void;
  error(msg: string, attrs?: Record<string, unknown>): void;
  debug(msg: string, attrs?: Record<string, unknown>): void;
}

export function jsonLogger(base: Record<string, unknown> = {}, out: NodeJS.WritableStream = process.stderr): Logger {
  const emit = (level: string) => (msg: string, attrs?: Record<string, unknown>) => {
    out.write(JSON.stringify({ ts: new Date().toISOString(), level, msg, ...base, ...attrs }, plain) + '\n');
  };
  return { info: emit('info'), warn: emit('warn'), error: emit('error'), debug: emit('debug') };
}

/** SDK log metadata carries Errors and bigints; JSON.stringify drops the one and throws on the other. */
function plain(_key: string, value: unknown): unknown {
  if (typeof value === 'bigint') return value.toString();
  if (value instanceof Error) return { name: value.name, message: value.message, stack: value.stack };
  return value;
}

/** The Temporal SDK's own log lines (LogEntry) as vmsnap JSON lines, marked `sdk: true`. */
export function sdkLogFunction(log: Logger) {
  return (entry: { level: string; message: string; meta?: Record<string, unknown> }): void => {
    const level = entry.level === 'WARN' ? 'warn' : entry.level === 'ERROR' ? 'error' : entry.level === 'INFO' ? 'info' : 'debug';
    log[level](entry.message, { sdk: true, ...entry.meta });
  };
}
