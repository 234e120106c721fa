/**
 * What every layer logs through: one event name and fields per line. Payloads and credentials are
 * never passed here; callers log identifiers (connection ids, api names), not bytes. The process's
 * loggers (JSON or text on stderr) are made by proxy/logger.ts.
 */
export interface Logger {
  debug(event: string, fields?: Record<string, unknown>): void;
  info(event: string, fields?: Record<string, unknown>): void;
  warn(event: string, fields?: Record<string, unknown>): void;
  error(event: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
}

/** Logs nothing: the default where no logger is given (tests, embedders). */
export const silentLogger: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  child() {
    return silentLogger;
  },
};
