/**
 * One configuration model with one precedence order: command-line flags, then environment
 * variables (KOP_ + the flag name in upper snake case), then the YAML file given by --config,
 * then defaults. Every value is validated at start; a bad one is reported in one line naming the
 * option, the value (never a secret: tokens and passwords show as ***, store URLs redacted) and
 * the allowed range or form. What needs the file system (TLS files, the data directory) is checked
 * by startup-checks.ts, which the CLI runs right after this.
 */
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { parse as ParseYaml } from 'yaml';
import { DEFAULT_DATA_DIR, parseStoreUrl, STORE_URL_FORMS } from '../backends/open-store.js';
import { DEFAULT_STORE_TIMEOUT_MS } from '../backends/store.js';
import type { StoreTarget } from '../backends/open-store.js';
import { redactUrl } from '../backends/redact-url.js';
import type { HostPort } from './core/broker-map.js';
import { RELAY_DEFAULTS } from './core/defaults.js';
import type { LogFormat, LogLevel } from './logger.js';
import { SASL_MECHANISMS } from './client/sasl-client.js';
import type { SaslCredentials, SaslMechanism } from './client/sasl-client.js';
import type { CommitGuardMode, GroupOverride } from './offsets/guard-policy.js';
import { parseGroupModes } from './offsets/group-modes.js';
import type { GroupModeOverride } from './offsets/group-modes.js';
import { environmentProblem } from './config/env-strict.js';
import { nearestName } from './config/nearest-name.js';
import { unmetNeed } from './config/option-needs.js';
import { emptyStorePassword } from './config/store-password.js';
import { MIN_TOKEN_BYTES, tokenProblem } from './ops/http/token-policy.js';

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

type Kind =
  | 'string'
  | 'host'
  | 'int'
  | 'bool'
  | 'hostport'
  | 'hostports'
  | 'enum'
  | 'portmap'
  | 'store'
  | 'file'
  | 'dir'
  | 'patterns'
  | 'group-modes'
  | 'secret';

export interface OptionSpec {
  name: string;
  kind: Kind;
  help: string;
  default?: string;
  /** enum: the values; group-modes: the modes. */
  values?: readonly string[];
  /** int: the range; `zero` says what 0 means when 0 is allowed below `min`. */
  min?: number;
  max?: number;
  zero?: string;
  unit?: string;
  /** The accepted form, where the kind's general one says too little. */
  form?: string;
}

/** Node.js timers fire at once for anything longer (2^31-1 ms, about 24.8 days). */
export const MAX_TIMER_MS = 2_147_483_647;
const MAX_INT32 = 2_147_483_647;

/** Every option, in the order `--help` lists them. docs/configuration.md is generated from it. */
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
    help: 'Bootstrap listener; broker N is exposed on this port + 1 + N (port 0: any free port).',
  },
  {
    name: 'advertised-host',
    kind: 'host',
    help: 'Host name or IP address clients are told to connect to (default: the listen host).',
  },
  {
    name: 'broker-port',
    kind: 'portmap',
    help: 'Explicit node-id=port mappings, comma separated (e.g. 1=29092,2=29093).',
  },
  {
    name: 'bind-failure',
    kind: 'enum',
    values: ['exit', 'unready'],
    default: RELAY_DEFAULTS.bindFailure,
    help: 'A broker port that cannot be bound at start (in use, not permitted): exit (stop with exit code 2 naming the port) or unready (start anyway; /readyz answers 503 naming the port, and binding is retried every 5 s). A broker port that cannot be bound later always turns /readyz 503 and is retried. The bootstrap (--listen) and --http ports always exit.',
  },
  {
    name: 'store',
    kind: 'store',
    help: 'Offset store URL: embedded:<dir>, redis://, rediss://, redis+sentinel://, redis+cluster://, zk://, memory:// (docs/configuration.md#store-urls). Default: the embedded store in --data-dir.',
  },
  {
    name: 'data-dir',
    kind: 'dir',
    default: DEFAULT_DATA_DIR,
    help: 'Directory of the embedded store: created if missing; must be writable, on a real file system.',
  },
  {
    name: 'http',
    kind: 'hostport',
    help: 'Address of the HTTP endpoint (metrics, health, admin), e.g. 127.0.0.1:9464.',
  },
  { name: 'config', kind: 'file', help: 'YAML file with any of these options (flag names as keys).' },
  {
    name: 'http-token',
    kind: 'secret',
    form: `printable ASCII without spaces, at least ${MIN_TOKEN_BYTES} bytes, not a placeholder`,
    help: `Bearer token of the HTTP endpoint: required by /metrics and /admin (/healthz and /readyz stay open). Without it, the admin routes that change offsets (PUT, DELETE) are refused with 403. At least ${MIN_TOKEN_BYTES} printable ASCII characters, no spaces; placeholders ("change-me", "demo-token", ...) are refused. Never logged.`,
  },
  {
    name: 'lag-interval-ms',
    kind: 'int',
    default: '30000',
    min: 1,
    max: MAX_TIMER_MS,
    zero: 'lag metrics off',
    unit: 'ms',
    help: 'How often consumer lag is computed for the groups in the store.',
  },
  {
    name: 'lag-groups-include',
    kind: 'patterns',
    help: 'Groups whose lag is exported: names or * patterns, comma separated (default: all).',
  },
  {
    name: 'lag-groups-exclude',
    kind: 'patterns',
    help: 'Groups whose lag is not exported: names or * patterns, comma separated; wins over include.',
  },
  {
    name: 'lag-max-groups',
    kind: 'int',
    default: '500',
    min: 1,
    max: MAX_INT32,
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
    default: String(RELAY_DEFAULTS.maxFrameSize),
    min: 1024,
    max: MAX_INT32,
    unit: 'bytes',
    help: 'Largest request or response frame; larger ones close the connection.',
  },
  {
    name: 'max-in-flight',
    kind: 'int',
    default: String(RELAY_DEFAULTS.maxInFlight),
    min: 1,
    max: MAX_INT32,
    help: 'Requests in flight per client connection before the proxy stops reading it.',
  },
  {
    name: 'native-relay',
    kind: 'enum',
    values: ['auto', 'on', 'off'],
    default: 'auto',
    help: 'Relay plain TCP connections natively while every frame on them is one the proxy passes on unread (Produce, Fetch below v16, ListOffsets, ...): an addon reads and writes both sockets on the event loop without a JavaScript call per read, and hands the connection back to JavaScript for any frame the proxy reads. auto: when `npm run build` compiled the addon (the start log says whether it is used); on: the same, and the start fails with exit code 2 when the addon is not there or a side is TLS; off: JavaScript only. Gauge: kop_native_relay_connections.',
  },
  {
    name: 'native-relay-after',
    kind: 'int',
    default: String(RELAY_DEFAULTS.nativeRelayAfter),
    min: 1,
    max: MAX_INT32,
    unit: 'requests',
    help: "Requests in a row that the proxy passes on unread before a connection moves to the native relay (--native-relay); any request the proxy reads hands the connection back to JavaScript and starts the count again. Higher keeps connections that mix in such requests (a group coordinator's) in JavaScript.",
  },
  {
    name: 'max-connections',
    kind: 'int',
    default: String(RELAY_DEFAULTS.maxConnections),
    min: 1,
    max: MAX_INT32,
    help: 'Client connections at once, all listeners together; more are closed when accepted (connection storms).',
  },
  {
    name: 'max-buffered-request-bytes',
    kind: 'int',
    default: String(RELAY_DEFAULTS.maxBufferedRequestBytes),
    min: 1,
    max: Number.MAX_SAFE_INTEGER,
    unit: 'bytes',
    help: "Memory for requests not yet fully received, all client connections together, like a broker's queued.max.request.bytes. A request over 64 KiB reserves its declared size once its body starts to arrive (whether JavaScript or the native relay passes it on); while the reservations reach this limit, a connection starting such a request is no longer read (its client waits) until memory is freed, then in arrival order; --idle-timeout-ms still applies. Requests up to 64 KiB are always read. Memory can pass the limit by one request and one 64 KiB socket read per connection. Gauge: kop_request_buffer_bytes.",
  },
  {
    name: 'max-buffered-response-bytes',
    kind: 'int',
    default: String(RELAY_DEFAULTS.maxBufferedResponseBytes),
    min: 1,
    max: Number.MAX_SAFE_INTEGER,
    unit: 'bytes',
    help: "Memory for responses clients have not read yet, all client connections together, whether the broker or the proxy answered. A connection holding 1 MiB of them, or any while this limit is reached, is no longer read and starts no answer of the proxy's own until its client reads, as a broker stops reading a connection while a response to it is being sent; other connections go on. Memory can pass the limit by one response per connection. Gauge: kop_response_buffer_bytes.",
  },
  {
    name: 'idle-timeout-ms',
    kind: 'int',
    default: String(RELAY_DEFAULTS.idleTimeoutMs),
    min: 1,
    max: MAX_TIMER_MS,
    zero: 'never',
    unit: 'ms',
    help: "A client connection with nothing in flight and no traffic for this long is closed, like a broker's connections.max.idle.ms, and so is one whose client has read nothing of its answers for this long: checked every tenth of it (from 10 ms to 1 s), so closed within that much after.",
  },
  {
    name: 'request-timeout-ms',
    kind: 'int',
    default: String(RELAY_DEFAULTS.requestTimeoutMs),
    min: 1,
    max: MAX_TIMER_MS,
    unit: 'ms',
    help: "Deadline of the proxy's own requests to brokers (authorization probes on a client's connection, lookups, fallbacks, mirrored commits; a lookup of several requests has one deadline in all) and of broker connects. A client waiting on one is answered by then (docs/errors.md says with what).",
  },
  {
    name: 'shutdown-timeout-ms',
    kind: 'int',
    default: String(RELAY_DEFAULTS.shutdownTimeoutMs),
    min: 1,
    max: MAX_TIMER_MS,
    unit: 'ms',
    help: 'SIGTERM or SIGINT ends the process within this long: in-flight requests are waited for up to it (less a reserve of up to 1 s to close the store); whatever is still pending then is abandoned and the process exits with code 1.',
  },
  { name: 'client-tls-cert', kind: 'file', help: 'PEM certificate: serve TLS to clients.' },
  { name: 'client-tls-key', kind: 'file', help: 'PEM private key for client TLS.' },
  { name: 'client-tls-ca', kind: 'file', help: 'PEM CA bundle for client certificates.' },
  {
    name: 'client-tls-require-cert',
    kind: 'bool',
    default: 'false',
    help: 'Require and verify client certificates.',
  },
  { name: 'broker-tls', kind: 'bool', default: 'false', help: 'Connect to brokers with TLS.' },
  { name: 'broker-tls-ca', kind: 'file', help: 'PEM CA bundle to verify brokers.' },
  { name: 'broker-tls-cert', kind: 'file', help: 'PEM client certificate for brokers (mutual TLS).' },
  { name: 'broker-tls-key', kind: 'file', help: 'PEM private key for broker mutual TLS.' },
  {
    name: 'broker-tls-insecure',
    kind: 'bool',
    default: 'false',
    help: 'Do not verify broker certificates (testing only).',
  },
  {
    name: 'store-timeout-ms',
    kind: 'int',
    default: String(DEFAULT_STORE_TIMEOUT_MS),
    min: 1,
    max: MAX_TIMER_MS,
    unit: 'ms',
    help:
      'Deadline of one offset store operation; a commit that misses it is answered with a retriable error, and ' +
      'offset requests are then answered at once until the store answers a probe again. Keep it well under the ' +
      "clients' heartbeat interval (3 s by default): their heartbeat answers wait behind their commits.",
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
    kind: 'group-modes',
    values: ['fence', 'cas', 'off'],
    help: 'Per-group overrides of commit-guard: group-or-pattern=mode,... (* wildcards; first match wins).',
  },
  {
    name: 'unknown-topics',
    kind: 'enum',
    values: ['reject', 'allow'],
    default: 'reject',
    help: 'Commits to topics/partitions the cluster does not have: refuse them with UNKNOWN_TOPIC_OR_PARTITION, as a broker does (reject), or store them (allow: for mirroring, where the offsets belong to topics of another cluster).',
  },
  {
    name: 'unknown-topics-group',
    kind: 'group-modes',
    values: ['reject', 'allow'],
    help: 'Per-group overrides of unknown-topics: group-or-pattern=reject|allow,... (* wildcards; first match wins), e.g. mirror-*=allow.',
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
    values: SASL_MECHANISMS,
    help: "SASL mechanism of the proxy's own connections to the cluster (metadata, coordinators, lag, fallback, mirrored commits). Clients' own SASL passes through untouched.",
  },
  {
    name: 'cluster-sasl-username',
    kind: 'string',
    help: "User of the proxy's own cluster connections (with --cluster-sasl-mechanism).",
  },
  {
    name: 'cluster-sasl-password',
    kind: 'secret',
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
  {
    name: 'log-format',
    kind: 'enum',
    values: ['text', 'json'],
    help: 'text: one readable line per event; json: one JSON object per line. Default: text when stderr is a terminal, json otherwise.',
  },
];

export type UnknownTopics = 'reject' | 'allow';

export interface ProxyConfig {
  bootstrapServers: HostPort[];
  listen: HostPort;
  advertisedHost: string | undefined;
  brokerPorts: Map<number, number>;
  bindFailure: 'exit' | 'unready';
  store: string | undefined;
  /** What --store names, parsed (the embedded store's directory resolved with --data-dir). */
  storeTarget: StoreTarget;
  dataDir: string;
  http: HostPort | undefined;
  httpToken: string | undefined;
  lag: { intervalMs: number; include: string[]; exclude: string[]; maxGroups: number };
  metricsApiVersions: boolean;
  maxFrameSize: number;
  maxInFlight: number;
  nativeRelay: 'auto' | 'on' | 'off';
  nativeRelayAfter: number;
  maxConnections: number;
  maxBufferedRequestBytes: number;
  maxBufferedResponseBytes: number;
  idleTimeoutMs: number;
  requestTimeoutMs: number;
  shutdownTimeoutMs: number;
  clientTls: { cert: string; key: string; ca: string | undefined; requireCert: boolean } | undefined;
  brokerTls:
    | { ca: string | undefined; cert: string | undefined; key: string | undefined; insecure: boolean }
    | undefined;
  logLevel: LogLevel;
  /** undefined: text on a terminal, JSON otherwise (decided where the logger is made). */
  logFormat: LogFormat | undefined;
  storeTimeoutMs: number;
  commitGuard: CommitGuardMode;
  commitGuardGroups: GroupOverride[];
  unknownTopics: UnknownTopics;
  unknownTopicsGroups: GroupModeOverride<UnknownTopics>[];
  fallback: 'none' | 'upstream';
  mirrorCommits: boolean;
  authorize: 'broker' | 'off';
  /** The proxy's own SASL principal for its cluster connections. */
  clusterSasl: SaslCredentials | undefined;
  /** The options given (flags, environment, file) as raw text, secrets included: never log this. */
  given: ReadonlyMap<string, string>;
}

const byName = new Map(OPTIONS.map((o) => [o.name, o]));

/** Options whose value is or holds a secret: an empty one is refused, not taken as unset. */
function holdsSecret(o: OptionSpec): boolean {
  return o.kind === 'secret' || o.kind === 'store';
}

/** " (did you mean --http-token?)"-style hint for a misspelt option name, or ''. */
function didYouMean(given: string, prefix = ''): string {
  const guess = nearestName(
    given,
    OPTIONS.filter((o) => o.name !== 'config' || prefix === '--').map((o) => o.name),
  );
  return guess === undefined ? '' : `; did you mean ${prefix}${guess}?`;
}

export function envName(option: string): string {
  return 'KOP_' + option.toUpperCase().replace(/-/g, '_');
}

/** The value of an option as it may be shown (logs, errors): secrets masked, URLs redacted. */
export function shownValue(name: string, value: string): string {
  const kind = byName.get(name)?.kind;
  if (kind === 'secret') return '***';
  if (kind === 'store') return redactUrl(value);
  return value;
}

/** The accepted range or form of an option, as errors, --help and the docs state it. */
export function allowedForm(o: OptionSpec): string {
  if (o.form !== undefined) return o.form;
  switch (o.kind) {
    case 'int': {
      const unit = o.unit ? ` ${o.unit}` : '';
      const zero = o.zero !== undefined ? `, or 0 (${o.zero})` : '';
      return `a whole number from ${o.min} to ${o.max}${unit}${zero}`;
    }
    case 'bool':
      return 'true or false';
    case 'enum':
      return `one of ${o.values!.join(', ')}`;
    case 'hostport':
      return 'host:port, port 0 to 65535';
    case 'hostports':
      return 'host:port[,host:port...], ports 1 to 65535';
    case 'host':
      return 'a host name or an IP address';
    case 'portmap':
      return 'node-id=port[,node-id=port...], ports 1 to 65535, each port once';
    case 'store':
      return STORE_URL_FORMS;
    case 'file':
      return 'a readable file';
    case 'dir':
      return 'a writable directory on a real file system';
    case 'patterns':
      return 'group names or * patterns, comma separated';
    case 'group-modes':
      return `group-or-pattern=${o.values!.join('|')}[,...]`;
    case 'secret':
    case 'string':
      return 'a non-empty value';
  }
}

/** Reads flags (argv without the command), the environment and the YAML file into raw strings. */
export function collectRaw(argv: readonly string[], env: NodeJS.ProcessEnv): Map<string, string> {
  const flags = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('--'))
      throw new ConfigError('argument', arg, 'unexpected argument (options start with --; see --help)');
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq < 0 ? undefined : eq);
    const spec = byName.get(name);
    // Only the flag is shown: the value of a misspelt --http-tokn=... may be a secret.
    if (!spec)
      throw new ConfigError(
        name,
        arg.slice(0, eq < 0 ? undefined : eq),
        `unknown option (see --help)${didYouMean(name, '--')}`,
      );
    let value: string | undefined;
    if (eq >= 0) value = arg.slice(eq + 1);
    else if (spec.kind === 'bool' && (argv[i + 1] === undefined || argv[i + 1]!.startsWith('--')))
      value = 'true';
    else value = argv[++i];
    if (value === undefined)
      throw new ConfigError(name, null, `missing value: expected ${allowedForm(spec)}`);
    flags.set(name, value);
  }

  const envProblem = environmentProblem(
    env,
    new Set(OPTIONS.map((o) => envName(o.name))),
    new Set(OPTIONS.filter(holdsSecret).map((o) => envName(o.name))),
    (variable) =>
      nearestName(
        variable,
        OPTIONS.map((o) => envName(o.name)),
      ),
  );
  if (envProblem !== undefined) throw new ConfigError(envProblem.variable, envProblem.shown, envProblem.why);

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
  if (file !== undefined) merged.set('config', file);
  return merged;
}

const requireCjs = createRequire(import.meta.url);

/** yaml is loaded when a config file is read: a proxy configured by its flags does not hold it. */
function parseYaml(text: string): unknown {
  return (requireCjs('yaml') as { parse: typeof ParseYaml }).parse(text);
}

function readYaml(file: string): Map<string, string> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError('config', file, `cannot read: ${fileProblem(err)}; expected a readable file`);
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
    throw new ConfigError('config', file, 'expected a mapping of option names to values');
  for (const [k, v] of Object.entries(doc as Record<string, unknown>)) {
    if (!byName.has(k) || k === 'config')
      throw new ConfigError(
        k,
        '(not shown)',
        `unknown key in ${file} (the keys are the option names of --help)${didYouMean(k)}`,
      );
    // `http-token:` with nothing after it is YAML's null: an empty value, which each option's
    // check refuses, not the text "null" (that would have been a token).
    if (v === null) out.set(k, '');
    else if (Array.isArray(v)) out.set(k, v.map(String).join(','));
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

/** A file system error as a short reason (the code and what it means), not Node's full message. */
export function fileProblem(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  const reasons: Record<string, string> = {
    ENOENT: 'no such file or directory',
    EACCES: 'permission denied',
    EPERM: 'operation not permitted',
    EISDIR: 'is a directory',
    ENOTDIR: 'a part of the path is not a directory',
    EROFS: 'read-only file system',
    ENOSPC: 'no space left on the device',
    ELOOP: 'too many symbolic links',
    ENAMETOOLONG: 'name too long',
  };
  if (code !== undefined && reasons[code] !== undefined) return `${reasons[code]} (${code})`;
  return code ?? (err instanceof Error ? err.message : String(err));
}

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
  const get = (name: string): string | undefined => raw.get(name) ?? byName.get(name)?.default;
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
      return fail(name, text, `${(err as Error).message}; expected ${allowedForm(byName.get(name)!)}`);
    }
  };
  const int = (name: string): number =>
    value(name, (t) => {
      const o = byName.get(name)!;
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
      if (!byName.get(name)!.values!.includes(t)) throw new Error('not an allowed value');
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
      `required: expected ${allowedForm(byName.get('bootstrap-server')!)}`,
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
        // The store parsers name what is wrong and redact the URL themselves; the URL is not repeated.
        const message = (err as Error).message;
        const shown = shownValue('store', t.trim());
        const at = message.indexOf(`${shown}: `);
        throw new ConfigError('store', shown, at < 0 ? message : message.slice(at + shown.length + 2));
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
      const parsed = parseGroupModes(t, byName.get(name)!.values! as readonly M[]);
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

/** The option's help with its accepted values or range and its default, as --help and the docs show it. */
export function describeOption(o: OptionSpec, code: (s: string) => string = (s) => s): string {
  let text = o.help;
  if (o.kind === 'enum') text += ` One of: ${o.values!.map(code).join(', ')}.`;
  if (o.kind === 'group-modes') text += ` Modes: ${o.values!.map(code).join(', ')}.`;
  if (o.kind === 'int') {
    const unit = o.unit ? ` ${o.unit}` : '';
    text += ` Range: ${code(`${o.min}`)} to ${code(`${o.max}`)}${unit}`;
    text += o.zero !== undefined ? `, or ${code('0')}: ${o.zero}.` : '.';
  }
  return text;
}

export function usage(): string {
  const lines = [
    'Usage: kafka-offset-proxy --bootstrap-server host:port[,host:port...] [options]',
    '       kafka-offset-proxy offsets <groups|export|import|get|set|delete> ...   (see: kafka-offset-proxy offsets --help)',
    '       kafka-offset-proxy --version | --help',
    '',
    'Options (each also as environment variable KOP_<NAME> or as a key of the --config YAML file;',
    'flags win over the environment, which wins over the file):',
  ];
  for (const o of OPTIONS) {
    const def = o.default !== undefined ? ` (default ${o.default})` : '';
    lines.push(`  --${o.name.padEnd(26)} ${describeOption(o)}${def}`);
  }
  lines.push(
    '',
    'Exit codes: 0 stopped by SIGTERM/SIGINT, 1 shutdown deadline passed or failed, 2 bad configuration',
    '(one line naming the option), 70 unexpected internal error; a second SIGTERM/SIGINT ends the process',
    'by that signal. SIGHUP reads the --config file and the client TLS files again (docs/deploy.md#signals).',
  );
  return lines.join('\n');
}
