/**
 * Every option of the proxy and its CLI, with its kind, range and default: the one table that
 * the parser (config.ts), --help and docs/configuration.md (generated from it) all read.
 */
import { DEFAULT_DATA_DIR, STORE_URL_FORMS } from '../../backends/open-store.js';
import { DEFAULT_STORE_TIMEOUT_MS } from '../../backends/store.js';
import { redactUrl } from '../../backends/redact-url.js';
import { RELAY_DEFAULTS } from '../core/defaults.js';
import { SASL_MECHANISMS } from '../client/sasl-client.js';
import { MIN_TOKEN_BYTES } from '../ops/http/token-policy.js';

export type OptionKind =
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
  kind: OptionKind;
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
export const MAX_INT32 = 2_147_483_647;

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
    help: 'Address of the HTTP endpoint (metrics, health, admin unless --admin-http), e.g. 127.0.0.1:9464.',
  },
  {
    name: 'admin-http',
    kind: 'hostport',
    help: 'Address of a separate HTTP endpoint for the offsets admin API (/admin), e.g. 127.0.0.1:9465: the admin routes are served only there, while --http keeps the probes and /metrics. Same --http-token. Needs --http.',
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
    help: 'Relay plain TCP connections natively while every frame on them is one the proxy passes on unread (Produce, Fetch, ListOffsets, ...; the NodeEndpoints of Fetch answers rewritten by a JavaScript call): an addon reads and writes both sockets on the event loop without a JavaScript call per read, and hands the connection back to JavaScript for any frame the proxy reads. auto: when `npm run build` compiled the addon (the start log says whether it is used); on: the same, and the start fails with exit code 2 when the addon is not there or a side is TLS; off: JavaScript only. Gauge: kop_native_relay_connections.',
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
    help: "Memory for requests not yet fully received, all client connections together, like a broker's queued.max.request.bytes. A request over 64 KiB reserves its declared size once its body starts to arrive (whether JavaScript or the native relay passes it on); while the reservations reach this limit, a connection starting such a request is no longer read (its client waits) until memory is freed, then in arrival order; --idle-timeout-ms still applies. Requests up to 64 KiB are always read. Memory can pass the limit by one request and one 64 KiB socket read per connection. The native relay passes such a request on as it arrives, and the broker allocates its declared size at once (its own queued.max.request.bytes is unbounded by default): this limit also bounds what clients can make the broker allocate that way. Gauge: kop_request_buffer_bytes.",
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
  {
    name: 'client-tls-handshake-timeout-ms',
    kind: 'int',
    default: String(RELAY_DEFAULTS.tlsHandshakeTimeoutMs),
    min: 1,
    max: MAX_TIMER_MS,
    unit: 'ms',
    help: "A client connection whose TLS handshake has not finished this long after it was accepted is closed, and its place under --max-connections freed (a client that stops half-way would otherwise hold it as long as it stays connected). Like a broker's limit on connection setup; a handshake still in progress is closed too.",
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

export const OPTION_BY_NAME = new Map(OPTIONS.map((o) => [o.name, o]));

/** Options whose value is or holds a secret: an empty one is refused, not taken as unset. */
export function holdsSecret(o: OptionSpec): boolean {
  return o.kind === 'secret' || o.kind === 'store';
}

export function envName(option: string): string {
  return 'KOP_' + option.toUpperCase().replace(/-/g, '_');
}

/** The value of an option as it may be shown (logs, errors): secrets masked, URLs redacted. */
export function shownValue(name: string, value: string): string {
  const kind = OPTION_BY_NAME.get(name)?.kind;
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
