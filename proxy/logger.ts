/**
 * Logs: one line per event on stderr, as a JSON object (`json`, for log collectors) or as readable
 * text (`text`: time, level, event, then key=value fields). Payloads and credentials are never
 * passed here; callers log identifiers (connection ids, api names), not bytes.
 */
import type { Logger } from './common/log.js';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type LogFormat = 'text' | 'json';

const rank: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

// The interface every layer logs through lives in common/ (so the relay needs nothing of the
// process); this module makes the loggers the process uses.
export type { Logger } from './common/log.js';
export { silentLogger } from './common/log.js';

/** text on a terminal, JSON otherwise (--log-format unset). */
export function defaultLogFormat(stream: { isTTY?: boolean } = process.stderr): LogFormat {
  return stream.isTTY ? 'text' : 'json';
}

/**
 * A level that can change while the process runs (SIGHUP reloads --log-level): the logger made
 * with it and all its children read it at each line.
 */
export interface LevelSetting {
  level: LogLevel;
}

export function createLogger(
  level: LogLevel | LevelSetting = 'info',
  base: Record<string, unknown> = {},
  sink: (line: string) => void = (line) => process.stderr.write(line + '\n'),
  format: LogFormat = 'json',
): Logger {
  const setting = typeof level === 'string' ? { level } : level;
  const emit = (lvl: LogLevel, event: string, fields?: Record<string, unknown>): void => {
    if (rank[lvl] < rank[setting.level]) return;
    const time = new Date().toISOString();
    sink(
      format === 'json'
        ? JSON.stringify({ time, level: lvl, event, ...base, ...fields }, errorReplacer)
        : textLine(time, lvl, event, { ...base, ...fields }),
    );
  };
  return {
    debug: (e, f) => emit('debug', e, f),
    info: (e, f) => emit('info', e, f),
    warn: (e, f) => emit('warn', e, f),
    error: (e, f) => emit('error', e, f),
    child: (fields) => createLogger(setting, { ...base, ...fields }, sink, format),
  };
}

/** Fields every line of the process carries; the text form leaves them out (one program, one service). */
const CONSTANT_FIELDS = new Set(['service']);

function textLine(time: string, level: LogLevel, event: string, fields: Record<string, unknown>): string {
  let line = `${time} ${level.toUpperCase().padEnd(5)} ${event}`;
  for (const [key, value] of Object.entries(fields)) {
    if (value === undefined || CONSTANT_FIELDS.has(key)) continue;
    line += ` ${key}=${textValue(value)}`;
  }
  return line;
}

/** A bare word when it reads unambiguously, otherwise JSON (quoted, escaped: one line always). */
function textValue(value: unknown): string {
  if (value instanceof Error) return textValue(value.message);
  if (typeof value === 'string') return /^[\w.:/@+*,-]+$/.test(value) ? value : JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint')
    return String(value);
  if (value === null) return 'null';
  return JSON.stringify(value, errorReplacer) ?? String(value);
}

function errorReplacer(_key: string, value: unknown): unknown {
  if (value instanceof Error) return { name: value.name, message: value.message };
  if (typeof value === 'bigint') return value.toString();
  return value;
}
