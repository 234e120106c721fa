/** A configuration value refused at start: the CLI prints it in one line and exits 2. */
export class ConfigError extends Error {
  /** `shown` is the value as it may be printed: callers pass *** or a redacted URL for secrets. */
  constructor(
    readonly key: string,
    shown: unknown,
    why: string,
  ) {
    super(`invalid configuration: ${key}=${JSON.stringify(shown)}: ${why}`);
    this.name = 'ConfigError';
  }
}
