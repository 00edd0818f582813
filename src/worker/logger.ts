import { fstatSync } from 'node:fs';

/** Structured JSON logs, one object per line. Context (workflow id, domain, phase) rides in attrs. */
export interface Logger {
  info(msg: string, attrs?: Record<string, unknown>): void;
  warn(msg: string, attrs?: Record<string, unknown>): void;
  error(msg: string, attrs?: Record<string, unknown>): void;
  debug(msg: string, attrs?: Record<string, unknown>): void;
}

/** Most severe first: a logger at level L writes L and everything before it. */
export const LOG_LEVELS = ['error', 'warn', 'info', 'debug'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** syslog(3) priorities, as journald reads them from a `<N>` line prefix (sd-daemon(3)). */
const PRIORITY: Record<LogLevel, number> = { error: 3, warn: 4, info: 6, debug: 7 };

export interface LogOutputOptions {
  /** Lines less severe than this are dropped. Default `info`. */
  level?: LogLevel;
  /** Prefix each line with its syslog priority. Default: when `out` is stderr and stderr is the journal. */
  journald?: boolean;
}

export function jsonLogger(base: Record<string, unknown> = {}, out: NodeJS.WritableStream = process.stderr, opts: LogOutputOptions = {}): Logger {
  const threshold = LOG_LEVELS.indexOf(opts.level ?? 'info');
  const journald = opts.journald ?? (out === process.stderr && stderrIsJournal());
  const emit = (level: LogLevel) => {
    if (LOG_LEVELS.indexOf(level) > threshold) return () => undefined;
    const prefix = journald ? `<${PRIORITY[level]}>` : '';
    return (msg: string, attrs?: Record<string, unknown>) => {
      out.write(prefix + JSON.stringify({ ts: new Date().toISOString(), level, msg, ...base, ...attrs }, plain) + '\n');
    };
  };
  return { info: emit('info'), warn: emit('warn'), error: emit('error'), debug: emit('debug') };
}

/**
 * `log` with `fields` on every line (a line's own attributes win): how a run's workflow id, run id
 * and domain reach every line written on its behalf, without each call site repeating them.
 */
export function withFields(log: Logger, fields: Record<string, unknown>): Logger {
  const bound = (level: LogLevel) => (msg: string, attrs?: Record<string, unknown>) => log[level](msg, { ...fields, ...attrs });
  return { info: bound('info'), warn: bound('warn'), error: bound('error'), debug: bound('debug') };
}

/**
 * Whether fd `fd` (stderr) is the systemd journal: systemd.exec(5) sets JOURNAL_STREAM to
 * `<dev>:<inode>` of the stream it connected; a child that inherited the variable with its stderr
 * redirected elsewhere must not match, so the numbers are compared with the fd's own.
 */
export function stderrIsJournal(env: NodeJS.ProcessEnv = process.env, fd = 2): boolean {
  const m = /^(\d+):(\d+)$/.exec(env.JOURNAL_STREAM ?? '');
  if (!m) return false;
  try {
    // bigint: inode numbers may pass 2^53.
    const st = fstatSync(fd, { bigint: true });
    return st.dev === BigInt(m[1]!) && st.ino === BigInt(m[2]!);
  } catch {
    return false;
  }
}

/** SDK log metadata carries Errors and bigints; JSON.stringify drops the one and throws on the other. */
function plain(_key: string, value: unknown): unknown {
  if (typeof value === 'bigint') return value.toString();
  if (value instanceof Error) return { name: value.name, message: value.message, stack: value.stack };
  return value;
}

/** The Temporal SDK's name for a vmsnap level (its DefaultLogger and core filters take these). */
export function sdkLogLevel(level: LogLevel): 'ERROR' | 'WARN' | 'INFO' | 'DEBUG' {
  return level.toUpperCase() as 'ERROR' | 'WARN' | 'INFO' | 'DEBUG';
}

/** The Temporal SDK's own log lines (LogEntry) as vmsnap JSON lines, marked `sdk: true`. */
export function sdkLogFunction(log: Logger) {
  return (entry: { level: string; message: string; meta?: Record<string, unknown> }): void => {
    const level = entry.level === 'WARN' ? 'warn' : entry.level === 'ERROR' ? 'error' : entry.level === 'INFO' ? 'info' : 'debug';
    log[level](entry.message, { sdk: true, ...entry.meta });
  };
}
