/**
 * Parses the Redis store URLs:
 *   redis://[user:pass@]host:port[/db][?opts]          rediss:// for TLS
 *   redis+sentinel://[user:pass@]host:port,host:port/mastername[?opts]
 *   redis+cluster://[user:pass@]host:port,host:port[?opts]
 * Options: wait=<replicas>, waitTimeoutMs=<ms> (WAIT after each commit, on the slot owner's
 * connection with cluster), waitAofLocal=0|1 and waitAofReplicas=<replicas> (WAITAOF after each
 * commit, Redis 7.2+ or Valkey: the primary's and replicas' append-only files fsynced; the same
 * timeout),
 * requestTtlMs=<ms> (how long commit outcomes are remembered for resends), prefix=<key prefix>,
 * username=, password= (instead of the userinfo, as ioredis's own URLs allow),
 * sentinelPassword= (the sentinels' own password, when it differs from the data nodes').
 */
import { redactUrl } from './redact-url.js';
import { StoreUrlError } from './errors.js';

export interface RedisEndpoint {
  host: string;
  port: number;
}

export interface RedisTarget {
  mode: 'standalone' | 'sentinel' | 'cluster';
  tls: boolean;
  endpoints: RedisEndpoint[];
  username: string | undefined;
  password: string | undefined;
  db: number;
  sentinelMaster: string | undefined;
  /** The sentinels' password (default: the data nodes' password). */
  sentinelPassword: string | undefined;
  wait: number;
  /** WAITAOF's numlocal (0 or 1) and numreplicas; both 0: no WAITAOF. */
  waitAofLocal: number;
  waitAofReplicas: number;
  waitTimeoutMs: number;
  requestTtlMs: number;
  prefix: string;
}

function fail(url: string, why: string): never {
  // No password is repeated in the message (`why` names parts of the URL through shown()).
  throw new StoreUrlError('invalid Redis store URL', redactUrl(url), why);
}

/**
 * A piece of the URL for an error message, only if it survives redaction: a password with an
 * unencoded '@' or '/' ends up in the pieces a broken URL is cut into.
 */
function shown(url: string, piece: string): string {
  return redactUrl(url).includes(piece) ? JSON.stringify(piece) : '(a part that may hold a password)';
}

function intParam(url: string, params: URLSearchParams, name: string, fallback: number, min: number): number {
  const raw = params.get(name);
  if (raw === null) return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < min)
    fail(url, `${name} must be an integer >= ${min}, got ${shown(url, raw)}`);
  return Number(raw);
}

const OPTIONS = [
  'wait',
  'waitAofLocal',
  'waitAofReplicas',
  'waitTimeoutMs',
  'requestTtlMs',
  'prefix',
  'username',
  'password',
  'sentinelPassword',
];

export function parseRedisUrl(url: string): RedisTarget {
  const m =
    // The userinfo runs to the last '@' before the query: a password may hold '@' or '/'.
    /^(redis|rediss|redis\+sentinel|redis\+cluster):\/\/(?:([^?#]*)@)?([^/?#@]*)(\/[^?#]*)?(\?[^#]*)?$/.exec(
      url,
    );
  if (m === null)
    fail(
      url,
      'expected redis://host:port, rediss://, redis+sentinel://h:p,h:p/master or redis+cluster://h:p,h:p',
    );
  const [, scheme, userinfo, hosts, path, query] = m;
  // "u:p@a:1,u:p@b:2" (a userinfo per host) would read as one password running to the last '@'.
  if (userinfo !== undefined && /@[^@]*,/.test(userinfo))
    fail(url, 'give the userinfo once, before the first host: redis+cluster://user:password@h:p,h:p');
  const mode =
    scheme === 'redis+sentinel' ? 'sentinel' : scheme === 'redis+cluster' ? 'cluster' : 'standalone';
  const endpoints = (hosts ?? '').split(',').map((hp) => {
    const hm = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(hp);
    if (hm === null) fail(url, `bad host:port ${shown(url, hp)}`);
    const port = hm[2] === undefined ? (mode === 'sentinel' ? 26379 : 6379) : Number(hm[2]);
    if (port < 1 || port > 65535) fail(url, `bad port in ${shown(url, hp)}`);
    return { host: hm[1]!.replace(/^\[|\]$/g, ''), port };
  });
  if (endpoints.length === 0 || hosts === '') fail(url, 'no host');
  if (mode === 'standalone' && endpoints.length > 1)
    fail(url, 'several hosts need redis+sentinel:// or redis+cluster://');
  let username: string | undefined;
  let password: string | undefined;
  const decode = (text: string): string => {
    try {
      return decodeURIComponent(text);
    } catch {
      fail(url, 'bad percent-encoding');
    }
  };
  if (userinfo !== undefined && userinfo !== '') {
    const i = userinfo.indexOf(':');
    if (i < 0) password = decode(userinfo);
    else {
      username = decode(userinfo.slice(0, i)) || undefined;
      password = decode(userinfo.slice(i + 1));
    }
  }
  const segment = (path ?? '').replace(/^\//, '');
  let db = 0;
  let sentinelMaster: string | undefined;
  if (mode === 'sentinel') {
    if (segment === '')
      fail(url, 'redis+sentinel:// needs the master name as path: redis+sentinel://h:p,h:p/mymaster');
    sentinelMaster = decode(segment);
  } else if (segment !== '') {
    if (mode === 'cluster') fail(url, 'Redis Cluster has no databases: remove the path');
    if (!/^\d+$/.test(segment)) fail(url, `database must be a number, got ${shown(url, segment)}`);
    db = Number(segment);
  }
  const params = new URLSearchParams(query ?? '');
  for (const k of params.keys()) {
    if (!OPTIONS.includes(k)) fail(url, `unknown option ${shown(url, k)} (options: ${OPTIONS.join(', ')})`);
  }
  if (params.has('username')) username = params.get('username') || undefined;
  if (params.has('password')) password = params.get('password') ?? undefined;
  if (params.has('sentinelPassword') && mode !== 'sentinel')
    fail(url, 'sentinelPassword needs redis+sentinel://');
  const wait = intParam(url, params, 'wait', 0, 0);
  const waitAofLocal = intParam(url, params, 'waitAofLocal', 0, 0);
  if (waitAofLocal > 1) fail(url, `waitAofLocal is 0 or 1 (the primary's own file), got ${waitAofLocal}`);
  return {
    mode,
    tls: scheme === 'rediss',
    endpoints,
    username,
    password,
    db,
    sentinelMaster,
    sentinelPassword: params.get('sentinelPassword') ?? password,
    wait,
    waitAofLocal,
    waitAofReplicas: intParam(url, params, 'waitAofReplicas', 0, 0),
    waitTimeoutMs: intParam(url, params, 'waitTimeoutMs', 100, 0),
    requestTtlMs: intParam(url, params, 'requestTtlMs', 600_000, 1000),
    prefix: params.get('prefix') ?? 'kop',
  };
}
