/**
 * One configuration model with one precedence order: command-line flags, then environment
 * variables (KOP_ + the flag name in upper snake case), then the YAML file given by --config,
 * then defaults. Every value is validated at start; a bad one is reported in one line naming the
 * key and the value.
 */
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import type { HostPort } from './broker-map.js';
import { parseHostPort, parseHostPortList } from './broker-map.js';
import type { LogLevel } from './logger.js';
import { SASL_MECHANISMS } from './sasl-client.js';
import type { SaslCredentials, SaslMechanism } from './sasl-client.js';
import type { CommitGuardMode, GroupOverride } from './offsets/guard-policy.js';
import { parseGroupOverrides } from './offsets/guard-policy.js';

export class ConfigError extends Error {
  constructor(key: string, value: unknown, why: string) {
    super(`invalid configuration: ${key}=${JSON.stringify(value)}: ${why}`);
    this.name = 'ConfigError';
  }
}

type Kind = 'string' | 'int' | 'bool' | 'hostport' | 'hostports' | 'enum' | 'portmap';

interface OptionSpec {
  name: string;
  kind: Kind;
  help: string;
  default?: string;
  values?: readonly string[];
}

/** Every option, in the order `--help` lists them. docs/configuration.md mirrors this table. */
export const OPTIONS: readonly OptionSpec[] = [
  {
    name: 'bootstrap-server',
    kind: 'hostports',
    help: 'Kafka brokers to bootstrap from (host:port,...). Required.',
  },
  {
    name: 'listen',
    kind: 'hostport',
    default: '127.0.0.1:19092',
    help: 'Bootstrap listener; broker N is exposed on this port + 1 + N.',
  },
  {
    name: 'advertised-host',
    kind: 'string',
    help: 'Host name clients are told to connect to (default: the listen host).',
  },
  {
    name: 'broker-port',
    kind: 'portmap',
    help: 'Explicit node-id=port mappings, comma separated (e.g. 1=29092,2=29093).',
  },
  {
    name: 'store',
    kind: 'string',
    help: 'Offset store URL: redis://, rediss://, redis+sentinel://, redis+cluster://, zk://, memory://. Default: the embedded store.',
  },
  {
    name: 'data-dir',
    kind: 'string',
    default: './kafka-offset-proxy-data',
    help: 'Directory of the embedded store.',
  },
  {
    name: 'http',
    kind: 'hostport',
    help: 'Address of the HTTP endpoint (metrics, health, admin), e.g. 127.0.0.1:9464.',
  },
  { name: 'config', kind: 'string', help: 'YAML file with any of these options (flag names as keys).' },
  {
    name: 'http-token',
    kind: 'string',
    help: 'Bearer token required by /metrics and the admin routes of the HTTP endpoint (/healthz and /readyz stay open).',
  },
  {
    name: 'lag-interval-ms',
    kind: 'int',
    default: '30000',
    help: 'How often consumer lag is computed for the groups in the store; 0 turns lag metrics off.',
  },
  {
    name: 'lag-groups-include',
    kind: 'string',
    help: 'Groups whose lag is exported: names or * patterns, comma separated (default: all).',
  },
  {
    name: 'lag-groups-exclude',
    kind: 'string',
    help: 'Groups whose lag is not exported: names or * patterns, comma separated; wins over include.',
  },
  {
    name: 'lag-max-groups',
    kind: 'int',
    default: '500',
    help: 'At most this many groups (first by name) get lag series, to bound metric cardinality.',
  },
  {
    name: 'metrics-api-versions',
    kind: 'bool',
    default: 'true',
    help: 'Label kop_requests_total with the API version; false exports version="" (fewer series).',
  },

  {
    name: 'max-frame-size',
    kind: 'int',
    default: String(100 * 1024 * 1024),
    help: 'Largest request or response frame in bytes; larger ones close the connection.',
  },
  {
    name: 'max-in-flight',
    kind: 'int',
    default: '1000',
    help: 'Requests in flight per client connection before the proxy stops reading it.',
  },
  {
    name: 'max-connections',
    kind: 'int',
    default: '10000',
    help: 'Client connections at once, all listeners together; more are closed when accepted (connection storms).',
  },
  {
    name: 'max-buffered-request-bytes',
    kind: 'int',
    default: String(256 * 1024 * 1024),
    help: "Memory for requests not yet fully received, all client connections together, like a broker's queued.max.request.bytes. A request over 64 KiB reserves its declared size once its body starts to arrive; while the reservations reach this limit, a connection starting such a request is no longer read (its client waits) until memory is freed, then in arrival order; --idle-timeout-ms still applies. Requests up to 64 KiB are always read. Memory can pass the limit by one request and one 64 KiB socket read per connection. Gauge: kop_request_buffer_bytes.",
  },
  {
    name: 'idle-timeout-ms',
    kind: 'int',
    default: '600000',
    help: "A client connection with nothing in flight and no traffic for this long is closed, like a broker's connections.max.idle.ms; 0 never.",
  },
  {
    name: 'request-timeout-ms',
    kind: 'int',
    default: '10000',
    help: "Deadline of the proxy's own requests to brokers and of broker connects.",
  },
  {
    name: 'shutdown-timeout-ms',
    kind: 'int',
    default: '10000',
    help: 'How long SIGTERM waits for in-flight requests.',
  },
  { name: 'client-tls-cert', kind: 'string', help: 'PEM certificate: serve TLS to clients.' },
  { name: 'client-tls-key', kind: 'string', help: 'PEM private key for client TLS.' },
  { name: 'client-tls-ca', kind: 'string', help: 'PEM CA bundle for client certificates.' },
  {
    name: 'client-tls-require-cert',
    kind: 'bool',
    default: 'false',
    help: 'Require and verify client certificates.',
  },
  { name: 'broker-tls', kind: 'bool', default: 'false', help: 'Connect to brokers with TLS.' },
  { name: 'broker-tls-ca', kind: 'string', help: 'PEM CA bundle to verify brokers.' },
  { name: 'broker-tls-cert', kind: 'string', help: 'PEM client certificate for brokers (mutual TLS).' },
  { name: 'broker-tls-key', kind: 'string', help: 'PEM private key for broker mutual TLS.' },
  {
    name: 'broker-tls-insecure',
    kind: 'bool',
    default: 'false',
    help: 'Do not verify broker certificates (testing only).',
  },
  {
    name: 'store-timeout-ms',
    kind: 'int',
    default: '5000',
    help: 'Deadline of one offset store operation; a commit that misses it is answered with a retriable error.',
  },
  {
    name: 'commit-guard',
    kind: 'enum',
    values: ['fence', 'cas', 'off'],
    default: 'fence',
    help: 'How commits are checked: fence (generations/members seen at the broker), cas (compare-and-set in metadata "cas:<expected>"), off (last write wins).',
  },
  {
    name: 'commit-guard-group',
    kind: 'string',
    help: 'Per-group overrides of commit-guard: group-or-pattern=mode,... (* wildcards; first match wins).',
  },
  {
    name: 'unknown-topics',
    kind: 'enum',
    values: ['allow', 'reject'],
    default: 'allow',
    help: 'Commits to topics/partitions the cluster does not have: store them (allow) or refuse them (reject).',
  },
  {
    name: 'fallback',
    kind: 'enum',
    values: ['none', 'upstream'],
    default: 'none',
    help: 'upstream: partitions the store has never seen are read once from the broker (migration from broker-kept offsets); none: they have no offset.',
  },
  {
    name: 'cluster-sasl-mechanism',
    kind: 'enum',
    values: ['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'],
    help: "SASL mechanism of the proxy's own connections to the cluster (metadata, coordinators, lag, fallback, mirrored commits). Clients' own SASL passes through untouched.",
  },
  {
    name: 'cluster-sasl-username',
    kind: 'string',
    help: "User of the proxy's own cluster connections (with --cluster-sasl-mechanism).",
  },
  {
    name: 'cluster-sasl-password',
    kind: 'string',
    help: 'Password of that user; prefer the environment variable or the config file to a flag. Never logged.',
  },
  {
    name: 'authorize',
    kind: 'enum',
    values: ['broker', 'off'],
    default: 'broker',
    help: "broker: offsets are committed, fetched or deleted only where the cluster's ACLs allow the client's principal (asked of the broker on the client's own connection); off: no checks.",
  },
  {
    name: 'mirror-commits',
    kind: 'bool',
    default: 'false',
    help: "Also write accepted commits to the broker's group coordinator, so broker-side tools see the offsets.",
  },
  {
    name: 'log-level',
    kind: 'enum',
    values: ['debug', 'info', 'warn', 'error'],
    default: 'info',
    help: 'Log level.',
  },
];

export interface ProxyConfig {
  bootstrapServers: HostPort[];
  listen: HostPort;
  advertisedHost: string | undefined;
  brokerPorts: Map<number, number>;
  store: string | undefined;
  dataDir: string;
  http: HostPort | undefined;
  httpToken: string | undefined;
  lag: { intervalMs: number; include: string[]; exclude: string[]; maxGroups: number };
  metricsApiVersions: boolean;
  maxFrameSize: number;
  maxInFlight: number;
  maxConnections: number;
  maxBufferedRequestBytes: number;
  idleTimeoutMs: number;
  requestTimeoutMs: number;
  shutdownTimeoutMs: number;
  clientTls: { cert: string; key: string; ca: string | undefined; requireCert: boolean } | undefined;
  brokerTls:
    | { ca: string | undefined; cert: string | undefined; key: string | undefined; insecure: boolean }
    | undefined;
  logLevel: LogLevel;
  storeTimeoutMs: number;
  commitGuard: CommitGuardMode;
  commitGuardGroups: GroupOverride[];
  unknownTopics: 'allow' | 'reject';
  fallback: 'none' | 'upstream';
  mirrorCommits: boolean;
  authorize: 'broker' | 'off';
  /** The proxy's own SASL principal for its cluster connections. */
  clusterSasl: SaslCredentials | undefined;
}

const byName = new Map(OPTIONS.map((o) => [o.name, o]));

export function envName(option: string): string {
  return 'KOP_' + option.toUpperCase().replace(/-/g, '_');
}

/** Reads flags (argv without the command), the environment and the YAML file into raw strings. */
export function collectRaw(argv: readonly string[], env: NodeJS.ProcessEnv): Map<string, string> {
  const flags = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('--')) throw new ConfigError('argument', arg, 'unexpected argument');
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq < 0 ? undefined : eq);
    const spec = byName.get(name);
    if (!spec) throw new ConfigError(name, arg, 'unknown option (see --help)');
    let value: string | undefined;
    if (eq >= 0) value = arg.slice(eq + 1);
    else if (spec.kind === 'bool' && (argv[i + 1] === undefined || argv[i + 1]!.startsWith('--')))
      value = 'true';
    else value = argv[++i];
    if (value === undefined) throw new ConfigError(name, null, 'missing value');
    flags.set(name, value);
  }

  const merged = new Map<string, string>();
  const file = flags.get('config') ?? env[envName('config')];
  if (file !== undefined) {
    for (const [k, v] of readYaml(file)) merged.set(k, v);
  }
  for (const spec of OPTIONS) {
    const v = env[envName(spec.name)];
    if (v !== undefined && v !== '') merged.set(spec.name, v);
  }
  for (const [k, v] of flags) merged.set(k, v);
  return merged;
}

function readYaml(file: string): Map<string, string> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError('config', file, `cannot read: ${(err as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new ConfigError('config', file, `not valid YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  const out = new Map<string, string>();
  if (doc === null || doc === undefined) return out;
  if (typeof doc !== 'object' || Array.isArray(doc))
    throw new ConfigError('config', file, 'expected a mapping');
  for (const [k, v] of Object.entries(doc as Record<string, unknown>)) {
    if (!byName.has(k) || k === 'config') throw new ConfigError(k, v, `unknown key in ${file}`);
    if (Array.isArray(v)) out.set(k, v.map(String).join(','));
    else if (v !== null && typeof v === 'object') {
      out.set(
        k,
        Object.entries(v as Record<string, unknown>)
          .map(([a, b]) => `${a}=${String(b)}`)
          .join(','),
      );
    } else out.set(k, String(v));
  }
  return out;
}

export function loadConfig(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): ProxyConfig {
  const raw = collectRaw(argv, env);
  const get = (name: string): string | undefined => raw.get(name) ?? byName.get(name)?.default;

  const value = <T>(name: string, convert: (text: string) => T): T | undefined => {
    const text = get(name);
    if (text === undefined) return undefined;
    try {
      return convert(text);
    } catch (err) {
      throw new ConfigError(name, text, (err as Error).message);
    }
  };
  const int = (name: string, min: number): number =>
    value(name, (t) => {
      if (!/^\d+$/.test(t.trim())) throw new Error('expected a whole number');
      const n = Number(t);
      if (n < min) throw new Error(`must be at least ${min}`);
      return n;
    })!;
  const bool = (name: string): boolean =>
    value(name, (t) => {
      if (/^(true|yes|1)$/i.test(t)) return true;
      if (/^(false|no|0)$/i.test(t)) return false;
      throw new Error('expected true or false');
    })!;

  const nonEmpty = (name: string): string | undefined =>
    value(name, (t) => {
      if (t === '') throw new Error('must not be empty');
      return t;
    });
  const patternList = (name: string): string[] =>
    (get(name) ?? '')
      .split(',')
      .map((p) => p.trim())
      .filter(Boolean);

  const bootstrapServers = value('bootstrap-server', parseHostPortList);
  if (!bootstrapServers) throw new ConfigError('bootstrap-server', null, 'required');

  const oneOf = <T extends string>(name: string): T =>
    value(name, (t) => {
      const allowed = byName.get(name)!.values!;
      if (!allowed.includes(t)) throw new Error(`expected one of ${allowed.join(', ')}`);
      return t as T;
    })!;
  const logLevel = oneOf<LogLevel>('log-level');

  const clusterSasl = (): SaslCredentials | undefined => {
    const mechanism = get('cluster-sasl-mechanism');
    const username = get('cluster-sasl-username');
    const password = get('cluster-sasl-password');
    if (mechanism === undefined && username === undefined && password === undefined) return undefined;
    if (mechanism === undefined || !(SASL_MECHANISMS as readonly string[]).includes(mechanism)) {
      throw new ConfigError(
        'cluster-sasl-mechanism',
        mechanism ?? null,
        `expected one of ${SASL_MECHANISMS.join(', ')}`,
      );
    }
    if (!username)
      throw new ConfigError(
        'cluster-sasl-username',
        username ?? null,
        'required with cluster-sasl-mechanism',
      );
    if (password === undefined)
      throw new ConfigError('cluster-sasl-password', null, 'required with cluster-sasl-mechanism');
    return { mechanism: mechanism as SaslMechanism, username, password };
  };

  /** A certificate and its key: both or neither (a certificate alone would never be presented). */
  const certAndKey = (certName: string, keyName: string, what: string) => {
    const cert = get(certName);
    const key = get(keyName);
    if ((cert === undefined) !== (key === undefined)) {
      throw new ConfigError(
        cert === undefined ? certName : keyName,
        null,
        `${what} needs both a certificate and a key`,
      );
    }
    return cert !== undefined && key !== undefined ? { cert, key } : undefined;
  };

  const clientCertAndKey = certAndKey('client-tls-cert', 'client-tls-key', 'client TLS');
  const requireCert = bool('client-tls-require-cert');
  if (requireCert && get('client-tls-ca') === undefined) {
    throw new ConfigError('client-tls-ca', null, 'required when client-tls-require-cert is true');
  }
  const brokerTls = bool('broker-tls');
  const brokerCertAndKey = certAndKey('broker-tls-cert', 'broker-tls-key', 'broker mutual TLS');
  if (!brokerTls) {
    // Without broker-tls these would be ignored, and the proxy would dial TLS brokers in plaintext.
    const ignored = ['broker-tls-ca', 'broker-tls-cert', 'broker-tls-key', 'broker-tls-insecure'].find(
      (name) => get(name) !== undefined && (name !== 'broker-tls-insecure' || bool(name)),
    );
    if (ignored !== undefined) {
      throw new ConfigError(
        ignored,
        get(ignored),
        'needs broker-tls true (broker connections would be plaintext)',
      );
    }
  }

  return {
    bootstrapServers,
    listen: value('listen', parseHostPort)!,
    advertisedHost: get('advertised-host'),
    brokerPorts: value('broker-port', parsePortMap) ?? new Map(),
    store: get('store'),
    dataDir: get('data-dir')!,
    http: value('http', parseHostPort),
    httpToken: nonEmpty('http-token'),
    lag: {
      intervalMs: int('lag-interval-ms', 0),
      include: patternList('lag-groups-include'),
      exclude: patternList('lag-groups-exclude'),
      maxGroups: int('lag-max-groups', 1),
    },
    metricsApiVersions: bool('metrics-api-versions'),
    maxFrameSize: int('max-frame-size', 1024),
    maxInFlight: int('max-in-flight', 1),
    maxConnections: int('max-connections', 1),
    maxBufferedRequestBytes: int('max-buffered-request-bytes', 1),
    idleTimeoutMs: int('idle-timeout-ms', 0),
    requestTimeoutMs: int('request-timeout-ms', 1),
    shutdownTimeoutMs: int('shutdown-timeout-ms', 0),
    clientTls: clientCertAndKey ? { ...clientCertAndKey, ca: get('client-tls-ca'), requireCert } : undefined,
    brokerTls: brokerTls
      ? {
          ca: get('broker-tls-ca'),
          cert: brokerCertAndKey?.cert,
          key: brokerCertAndKey?.key,
          insecure: bool('broker-tls-insecure'),
        }
      : undefined,
    logLevel,
    storeTimeoutMs: int('store-timeout-ms', 1),
    commitGuard: oneOf<CommitGuardMode>('commit-guard'),
    commitGuardGroups: value('commit-guard-group', parseGroupOverrides) ?? [],
    unknownTopics: oneOf<'allow' | 'reject'>('unknown-topics'),
    fallback: oneOf<'none' | 'upstream'>('fallback'),
    mirrorCommits: bool('mirror-commits'),
    authorize: oneOf<'broker' | 'off'>('authorize'),
    clusterSasl: clusterSasl(),
  };
}

function parsePortMap(text: string): Map<number, number> {
  const map = new Map<number, number>();
  for (const part of text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const m = /^(\d+)=(\d+)$/.exec(part);
    if (!m) throw new Error(`expected node-id=port, got "${part}"`);
    const port = Number(m[2]);
    if (port < 1 || port > 65535) throw new Error(`port out of range in "${part}"`);
    map.set(Number(m[1]), port);
  }
  return map;
}

export function usage(): string {
  const lines = [
    'Usage: kafka-offset-proxy --bootstrap-server host:port[,host:port...] [options]',
    '',
    '       kafka-offset-proxy offsets <export|import|get|set|delete> ...   (see: kafka-offset-proxy offsets --help)',
    '',
    'Options (each also as environment variable KOP_<NAME> or as a key of the --config YAML file;',
    'flags win over the environment, which wins over the file):',
  ];
  for (const o of OPTIONS) {
    const values = o.values ? ` One of: ${o.values.join(', ')}.` : '';
    const def = o.default !== undefined ? ` (default ${o.default})` : '';
    lines.push(`  --${o.name.padEnd(26)} ${o.help}${values}${def}`);
  }
  return lines.join('\n');
}
