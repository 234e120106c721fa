/**
 * A configuration value refused at start: the CLI prints it in one line and exits 2. Its parts
 * are fields, so a caller that words it otherwise (the offsets CLI: `--key=value: reason`)
 * composes its own line from them instead of rewriting the message.
 */
export class ConfigError extends Error {
  /** The value as printed: JSON of what the caller passed (*** or a redacted URL for secrets). */
  readonly shown: string;

  /** `shown` is the value as it may be printed: callers pass *** or a redacted URL for secrets. */
  constructor(
    /** The option (or environment variable, or `argument`/`config`) the value was given for. */
    readonly key: string,
    shown: unknown,
    /** What is wrong with the value, without the key or the value. */
    readonly reason: string,
  ) {
    const printed = String(JSON.stringify(shown));
    super(`invalid configuration: ${key}=${printed}: ${reason}`);
    this.name = 'ConfigError';
    this.shown = printed;
  }

  /** `--key=value: reason`, as a command that takes the option as a flag words it. */
  asFlag(): string {
    return `--${this.key}=${this.shown}: ${this.reason}`;
  }
}
