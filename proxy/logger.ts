/**
 * Structured JSON logs: one line per event on stderr. Payloads and credentials are never passed
 * here; callers log identifiers (connection ids, api names), not bytes.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
const rank: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(event: string, fields?: Record<string, unknown>): void;
  info(event: string, fields?: Record<string, unknown>): void;
  warn(event: string, fields?: Record<string, unknown>): void;
  error(event: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
}

export function createLogger(
  level: LogLevel = 'info',
  base: Record<string, unknown> = {},
  sink: (line: string) => void = (line) => process.stderr.write(line + '\n'),
): Logger {
  const min = rank[level];
  const emit = (lvl: LogLevel, event: string, fields?: Record<string, unknown>): void => {
    if (rank[lvl] < min) return;
    sink(
      JSON.stringify(
        { time: new Date().toISOString(), level: lvl, event, ...base, ...fields },
        errorReplacer,
      ),
    );
  };
  return {
    debug: (e, f) => emit('debug', e, f),
    info: (e, f) => emit('info', e, f),
    warn: (e, f) => emit('warn', e, f),
    error: (e, f) => emit('error', e, f),
    child: (fields) => createLogger(level, { ...base, ...fields }, sink),
  };
}

function errorReplacer(_key: string, value: unknown): unknown {
  if (value instanceof Error) return { name: value.name, message: value.message };
  if (typeof value === 'bigint') return value.toString();
  return value;
}

export const silentLogger: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  child() {
    return silentLogger;
  },
};
