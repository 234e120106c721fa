/**
 * One configuration model with one precedence order: command-line flags, then environment
 * variables (KOP_ + the flag name in upper snake case), then the YAML file given by --config,
 * then defaults. Every value is validated at start; a bad one is reported in one line naming the
 * option, the value (never a secret: tokens and passwords show as ***, store URLs redacted) and
 * the allowed range or form. What needs the file system (TLS files, the data directory) is checked
 * by startup-checks.ts, which the CLI runs right after this.
 */
import net from 'node:net';
import path from 'node:path';
import { parseStoreUrl } from '../backends/open-store.js';
import { StoreUrlError } from '../backends/errors.js';
import type { HostPort } from './core/broker-map.js';
import type { LogFormat, LogLevel } from './logger.js';
import { SASL_MECHANISMS } from './client/sasl-client.js';
import type { SaslCredentials, SaslMechanism } from './client/sasl-client.js';
import type { CommitGuardMode } from './offsets/guard-policy.js';
import { parseGroupModes } from './offsets/group-modes.js';
import type { GroupModeOverride } from './offsets/group-modes.js';
import { ConfigError } from './config/config-error.js';
import { allowedForm, MAX_INT32, OPTION_BY_NAME, shownValue } from './config/options.js';
import { collectRaw } from './config/raw-sources.js';
import { unmetNeed } from './config/option-needs.js';
import type { ProxyConfig, UnknownTopics } from './config/proxy-config.js';
import { emptyStorePassword } from './config/store-password.js';
import { tokenProblem } from './ops/http/token-policy.js';

// The option table and the readers of raw values are modules of their own (proxy/config/); their
// names stay importable from here, where the proxy, the CLI and the tests have always found them.
export { ConfigError } from './config/config-error.js';
export type { OptionKind, OptionSpec } from './config/options.js';
export {
  allowedForm,
  describeOption,
  envName,
  MAX_TIMER_MS,
  OPTIONS,
  shownValue,
  usage,
} from './config/options.js';
export { collectRaw, fileProblem } from './config/raw-sources.js';
export type { ProxyConfig, UnknownTopics } from './config/proxy-config.js';

function parseHostPortStrict(text: string, minPort: number): HostPort {
  const trimmed = text.trim();
  const m = /^\[([^\]]+)\]:(\d{1,5})$/.exec(trimmed) ?? /^([^:\s[\]]+):(\d{1,5})$/.exec(trimmed);
  if (!m) throw new Error(`"${text}" is not host:port`);
  const port = Number(m[2]);
  if (port < minPort || port > 65535) throw new Error(`port ${m[2]} is out of range`);
  if (!isHost(m[1]!)) throw new Error(`"${m[1]}" is not a host name or IP address`);
  return { host: m[1]!, port };
}

/** A DNS name (labels of letters, digits, '-' and '_', dot separated; one final dot allowed) or an IP address. */
function isHost(text: string): boolean {
  if (net.isIP(text) !== 0) return true;
  const name = text.endsWith('.') ? text.slice(0, -1) : text;
  return (
    name.length > 0 &&
    name.length <= 253 &&
    name.split('.').every((label) => /^[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$/.test(label))
  );
}

function parsePortMap(text: string): Map<number, number> {
  const map = new Map<number, number>();
  const ports = new Map<number, number>();
  for (const part of text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const m = /^(\d{1,10})=(\d{1,5})$/.exec(part);
    if (!m) throw new Error(`"${part}" is not node-id=port`);
    const node = Number(m[1]);
    const port = Number(m[2]);
    if (node > MAX_INT32) throw new Error(`node id ${m[1]} is out of range`);
    if (port < 1 || port > 65535) throw new Error(`port out of range in "${part}"`);
    if (map.has(node)) throw new Error(`node ${node} is mapped twice`);
    if (ports.has(port)) throw new Error(`port ${port} is given to nodes ${ports.get(port)} and ${node}`);
    map.set(node, port);
    ports.set(port, node);
  }
  if (map.size === 0) throw new Error('no mapping given');
  return map;
}

function parsePatterns(text: string): string[] {
  const parts = text.split(',').map((p) => p.trim());
  if (parts.some((p) => p === '')) throw new Error('an empty name or pattern (between commas, or no value)');
  return parts;
}

export interface LoadOptions {
  /** The offsets CLI needs the cluster for some actions only: without it, bootstrapServers is []. */
  bootstrapOptional?: boolean;
}

export function loadConfig(
  argv: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
  opts: LoadOptions = {},
): ProxyConfig {
  const raw = collectRaw(argv, env);
  const get = (name: string): string | undefined => raw.get(name) ?? OPTION_BY_NAME.get(name)?.default;
  const fail = (name: string, text: string | undefined, why: string): never => {
    throw new ConfigError(name, text === undefined ? null : shownValue(name, text), why);
  };

  /** Converts the option's text; a failure names the option, its value and the accepted form. */
  const value = <T>(name: string, convert: (text: string) => T): T | undefined => {
    const text = get(name);
    if (text === undefined) return undefined;
    try {
      return convert(text);
    } catch (err) {
      if (err instanceof ConfigError) throw err;
      return fail(
        name,
        text,
        `${(err as Error).message}; expected ${allowedForm(OPTION_BY_NAME.get(name)!)}`,
      );
    }
  };
  const int = (name: string): number =>
    value(name, (t) => {
      const o = OPTION_BY_NAME.get(name)!;
      const text = t.trim();
      if (!/^\d+$/.test(text)) throw new Error('not a whole number');
      const n = Number(text);
      if (n === 0 && o.zero !== undefined) return 0;
      if (n < o.min! || n > o.max!) throw new Error('out of range');
      return n;
    })!;
  const bool = (name: string): boolean =>
    value(name, (t) => {
      if (/^(true|yes|1)$/i.test(t)) return true;
      if (/^(false|no|0)$/i.test(t)) return false;
      throw new Error('not a boolean');
    })!;
  const oneOf = <T extends string>(name: string): T | undefined =>
    value(name, (t) => {
      if (!OPTION_BY_NAME.get(name)!.values!.includes(t)) throw new Error('not an allowed value');
      return t as T;
    });
  const text = (name: string): string | undefined =>
    value(name, (t) => {
      if (t === '') throw new Error('empty');
      return t;
    });

  const bootstrapServers = value('bootstrap-server', (t) => {
    const parts = t.split(',').map((s) => s.trim());
    if (parts.some((p) => p === '')) throw new Error('an empty entry');
    return parts.map((p) => parseHostPortStrict(p, 1));
  });
  if (!bootstrapServers && !opts.bootstrapOptional)
    throw new ConfigError(
      'bootstrap-server',
      null,
      `required: expected ${allowedForm(OPTION_BY_NAME.get('bootstrap-server')!)}`,
    );

  const listen = value('listen', (t) => parseHostPortStrict(t, 0))!;
  const brokerPorts = value('broker-port', parsePortMap) ?? new Map<number, number>();
  for (const [node, port] of brokerPorts) {
    if (port === listen.port)
      fail('broker-port', get('broker-port'), `node ${node}'s port ${port} is the --listen port`);
  }

  // Length and placeholders too: a guessable token would guard offset changes in name only.
  const token = value('http-token', (t) => {
    const problem = tokenProblem(t);
    if (problem !== null) throw new Error(problem);
    return t;
  });

  const clusterSasl = (): SaslCredentials | undefined => {
    const mechanism = oneOf<SaslMechanism>('cluster-sasl-mechanism');
    const username = text('cluster-sasl-username');
    const password = text('cluster-sasl-password');
    if (mechanism === undefined && username === undefined && password === undefined) return undefined;
    if (mechanism === undefined) {
      const given = username !== undefined ? 'cluster-sasl-username' : 'cluster-sasl-password';
      return fail(given, get(given), `needs cluster-sasl-mechanism (one of ${SASL_MECHANISMS.join(', ')})`);
    }
    if (username === undefined)
      fail('cluster-sasl-username', undefined, 'required with cluster-sasl-mechanism');
    if (password === undefined)
      fail('cluster-sasl-password', undefined, 'required with cluster-sasl-mechanism');
    return { mechanism, username: username!, password: password! };
  };

  /** A certificate and its key: both or neither (a certificate alone would never be presented). */
  const certAndKey = (certName: string, keyName: string, what: string) => {
    const cert = text(certName);
    const key = text(keyName);
    if ((cert === undefined) !== (key === undefined)) {
      fail(cert === undefined ? certName : keyName, undefined, `${what} needs both a certificate and a key`);
    }
    return cert !== undefined && key !== undefined ? { cert, key } : undefined;
  };

  const clientCertAndKey = certAndKey('client-tls-cert', 'client-tls-key', 'client TLS');
  const requireCert = bool('client-tls-require-cert');
  const clientCa = text('client-tls-ca');
  if (requireCert && clientCa === undefined) {
    fail('client-tls-ca', undefined, 'required when client-tls-require-cert is true');
  }
  if ((requireCert || clientCa !== undefined) && clientCertAndKey === undefined) {
    fail(
      requireCert ? 'client-tls-require-cert' : 'client-tls-ca',
      get(requireCert ? 'client-tls-require-cert' : 'client-tls-ca'),
      'needs client-tls-cert and client-tls-key (the proxy serves plaintext without them)',
    );
  }
  const brokerTls = bool('broker-tls');
  const brokerCertAndKey = certAndKey('broker-tls-cert', 'broker-tls-key', 'broker mutual TLS');
  if (!brokerTls) {
    // Without broker-tls these would be ignored, and the proxy would dial TLS brokers in plaintext.
    const ignored = ['broker-tls-ca', 'broker-tls-cert', 'broker-tls-key', 'broker-tls-insecure'].find(
      (name) => get(name) !== undefined && (name !== 'broker-tls-insecure' || bool(name)),
    );
    if (ignored !== undefined) {
      fail(ignored, get(ignored), 'needs broker-tls true (broker connections would be plaintext)');
    }
  }

  const dataDir = text('data-dir')!;
  const storeTarget =
    value('store', (t) => {
      // An empty URL would be the default embedded store: a Secret or variable that came out
      // empty must not silently switch the offsets to a local directory.
      if (t.trim() === '') throw new Error('empty');
      try {
        return parseStoreUrl(t, dataDir);
      } catch (err) {
        // The store parsers say what is wrong apart from the URL, which the option error shows once.
        if (!(err instanceof StoreUrlError)) throw err;
        throw new ConfigError('store', shownValue('store', t.trim()), err.reason);
      }
    }) ?? parseStoreUrl(undefined, dataDir);
  if (
    storeTarget.kind === 'embedded' &&
    raw.has('data-dir') &&
    path.resolve(storeTarget.dir) !== path.resolve(dataDir)
  ) {
    fail(
      'store',
      get('store'),
      `names the directory ${storeTarget.dir}, but --data-dir is ${dataDir}: give the directory once`,
    );
  }

  const groupModes = <M extends string>(name: string): GroupModeOverride<M>[] =>
    value(name, (t) => {
      const parsed = parseGroupModes(t, OPTION_BY_NAME.get(name)!.values! as readonly M[]);
      if (parsed.length === 0) throw new Error('no override given');
      return parsed;
    }) ?? [];

  const storePasswordProblem = emptyStorePassword(storeTarget);
  if (storePasswordProblem !== undefined) fail('store', get('store'), storePasswordProblem);

  const lagInclude = value('lag-groups-include', parsePatterns) ?? [];
  const lagExclude = value('lag-groups-exclude', parsePatterns) ?? [];

  const config: ProxyConfig = {
    bootstrapServers: bootstrapServers ?? [],
    listen,
    advertisedHost: value('advertised-host', (t) => {
      if (!isHost(t)) throw new Error('not a host name or IP address');
      return t;
    }),
    brokerPorts,
    bindFailure: oneOf<'exit' | 'unready'>('bind-failure')!,
    store: get('store'),
    storeTarget,
    dataDir: storeTarget.kind === 'embedded' ? storeTarget.dir : dataDir,
    http: value('http', (t) => parseHostPortStrict(t, 0)),
    adminHttp: value('admin-http', (t) => parseHostPortStrict(t, 0)),
    httpToken: token,
    lag: {
      intervalMs: int('lag-interval-ms'),
      include: lagInclude,
      exclude: lagExclude,
      maxGroups: int('lag-max-groups'),
    },
    metricsApiVersions: bool('metrics-api-versions'),
    maxFrameSize: int('max-frame-size'),
    maxInFlight: int('max-in-flight'),
    nativeRelay: oneOf<'auto' | 'on' | 'off'>('native-relay')!,
    nativeRelayAfter: int('native-relay-after'),
    maxConnections: int('max-connections'),
    maxBufferedRequestBytes: int('max-buffered-request-bytes'),
    maxBufferedResponseBytes: int('max-buffered-response-bytes'),
    idleTimeoutMs: int('idle-timeout-ms'),
    requestTimeoutMs: int('request-timeout-ms'),
    clientTlsHandshakeTimeoutMs: int('client-tls-handshake-timeout-ms'),
    shutdownTimeoutMs: int('shutdown-timeout-ms'),
    clientTls: clientCertAndKey ? { ...clientCertAndKey, ca: clientCa, requireCert } : undefined,
    brokerTls: brokerTls
      ? {
          ca: text('broker-tls-ca'),
          cert: brokerCertAndKey?.cert,
          key: brokerCertAndKey?.key,
          insecure: bool('broker-tls-insecure'),
        }
      : undefined,
    logLevel: oneOf<LogLevel>('log-level')!,
    logFormat: oneOf<LogFormat>('log-format'),
    storeTimeoutMs: int('store-timeout-ms'),
    commitGuard: oneOf<CommitGuardMode>('commit-guard')!,
    commitGuardGroups: groupModes<CommitGuardMode>('commit-guard-group'),
    unknownTopics: oneOf<UnknownTopics>('unknown-topics')!,
    unknownTopicsGroups: groupModes<UnknownTopics>('unknown-topics-group'),
    fallback: oneOf<'none' | 'upstream'>('fallback')!,
    mirrorCommits: bool('mirror-commits'),
    authorize: oneOf<'broker' | 'off'>('authorize')!,
    clusterSasl: clusterSasl(),
    given: raw,
  };
  const unmet = unmetNeed(config);
  if (unmet !== undefined) fail(unmet.option, get(unmet.option), unmet.why);
  return config;
}
