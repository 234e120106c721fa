/**
 * SIGHUP: reads the configuration again the way the start did (flags and the environment as
 * they were, the --config file as it is now, the client TLS files as they are now) and applies
 * what can change without a restart: the log level, the admin token, and the client TLS
 * certificate, key and CA (a rotated certificate; connections accepted from then on use it).
 * Everything else that changed is named in the log line as needing a restart and left as it
 * was. A configuration that no longer validates changes nothing: the line says why, as the
 * start would (a restart with it would fail).
 */
import { readFileSync } from 'node:fs';
import { ConfigError, loadConfig } from './config.js';
import type { ProxyConfig } from './config.js';
import type { LevelSetting } from './logger.js';
import type { ReloadOutcome } from './signals.js';
import { checkTlsFiles } from './startup-checks.js';
import type { ClientTls } from './core/proxy-options.js';

/** The options SIGHUP applies; changes to any other need a restart. */
export const RELOADABLE_OPTIONS = [
  'log-level',
  'http-token',
  'client-tls-cert',
  'client-tls-key',
  'client-tls-ca',
];

export interface ReloadTargets {
  argv: readonly string[];
  /** The environment at start: a process's environment does not change from outside. */
  env: NodeJS.ProcessEnv;
  logLevel: LevelSetting;
  /** The HTTP endpoint's token, when there is an endpoint. */
  setHttpToken: ((token: string | undefined) => void) | null;
  /** Swaps the client TLS material, when the listeners serve TLS. */
  replaceClientTls: ((tls: ClientTls) => void) | null;
}

export class ConfigReloader {
  /** The configuration in effect: the start's, with what reloads applied. */
  private running: ProxyConfig;
  private clientTlsFiles: Buffer[];

  constructor(
    config: ProxyConfig,
    private readonly targets: ReloadTargets,
  ) {
    this.running = config;
    this.clientTlsFiles = clientTlsMaterial(config);
  }

  /** Whether a SIGHUP can change anything: there is a file to read again. */
  get canReload(): boolean {
    return this.running.given.has('config') || this.running.clientTls !== undefined;
  }

  async reload(): Promise<ReloadOutcome> {
    if (!this.canReload) {
      return {
        level: 'warn',
        event: 'signal ignored: nothing to reload',
        fields: {
          why: 'every option comes from flags or the environment, fixed for the life of the process; SIGHUP reads the --config file and the client TLS files again',
        },
      };
    }
    let next: ProxyConfig;
    let material: Buffer[];
    try {
      next = loadConfig(this.targets.argv, this.targets.env);
      checkTlsFiles(next);
      material = clientTlsMaterial(next);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      return {
        level: 'warn',
        event: 'reload refused: configuration invalid, nothing changed',
        fields: { error: err.message },
      };
    }

    const reloaded: string[] = [];
    const running = this.running;
    // Compared with what runs, not with the last reload: a change that needs a restart is named
    // at every SIGHUP until the restart.
    const restartNeeded = [...new Set([...running.given.keys(), ...next.given.keys()])]
      .filter((name) => !RELOADABLE_OPTIONS.includes(name))
      .filter((name) => running.given.get(name) !== next.given.get(name));
    const given = new Map(running.given);
    const take = (name: string): void => {
      const value = next.given.get(name);
      if (value === undefined) given.delete(name);
      else given.set(name, value);
    };

    // The line saying what was reloaded is an info line: a level that shows info lines applies
    // before it, one that hides them after it (a reload to error still says that it happened).
    const levelChanged = next.logLevel !== running.logLevel;
    const levelNow = levelChanged && (next.logLevel === 'debug' || next.logLevel === 'info');
    if (levelChanged) reloaded.push('log-level');
    if (levelNow) this.targets.logLevel.level = next.logLevel;
    take('log-level');
    let httpToken = running.httpToken;
    if (next.httpToken !== running.httpToken) {
      if (this.targets.setHttpToken === null) restartNeeded.push('http-token');
      else {
        this.targets.setHttpToken(next.httpToken);
        httpToken = next.httpToken;
        take('http-token');
        reloaded.push('http-token');
      }
    }
    const tlsNames = ['client-tls-cert', 'client-tls-key', 'client-tls-ca'];
    const tlsShape = (c: ProxyConfig): string =>
      JSON.stringify([c.clientTls === undefined, c.clientTls?.ca === undefined, c.clientTls?.requireCert]);
    let clientTls = running.clientTls;
    if (tlsShape(running) !== tlsShape(next)) {
      // TLS turned on or off, a CA added or removed, client certificates required or not: the
      // listeners are made with these.
      restartNeeded.push(...tlsNames.filter((n) => running.given.get(n) !== next.given.get(n)));
    } else if (next.clientTls && this.targets.replaceClientTls !== null) {
      if (!sameBuffers(material, this.clientTlsFiles)) {
        this.targets.replaceClientTls(toClientTls(material, next.clientTls.requireCert));
        this.clientTlsFiles = material;
        reloaded.push('client-tls');
      }
      clientTls = next.clientTls;
      for (const n of tlsNames) take(n);
    }

    this.running = { ...running, logLevel: next.logLevel, httpToken, clientTls, given };
    return {
      level: 'info',
      event: reloaded.length > 0 ? 'configuration reloaded' : 'configuration reloaded: nothing changed',
      fields: { reloaded, restartNeeded: [...new Set(restartNeeded)].sort() },
      after: levelChanged && !levelNow ? () => (this.targets.logLevel.level = next.logLevel) : undefined,
    };
  }
}

/** The client TLS files' contents, in the order cert, key, CA. */
function clientTlsMaterial(config: ProxyConfig): Buffer[] {
  const t = config.clientTls;
  if (t === undefined) return [];
  return [readFileSync(t.cert), readFileSync(t.key), ...(t.ca !== undefined ? [readFileSync(t.ca)] : [])];
}

function toClientTls(material: Buffer[], requireCert: boolean): ClientTls {
  const [cert, key, ca] = material;
  return { cert: cert!, key: key!, ...(ca ? { ca } : {}), requireClientCert: requireCert };
}

function sameBuffers(a: Buffer[], b: Buffer[]): boolean {
  return a.length === b.length && a.every((buf, i) => buf.equals(b[i]!));
}
