/**
 * Parses the Redis store URLs:
 *   redis://[user:pass@]host:port[/db][?opts]          rediss:// for TLS
 *   redis+sentinel://[user:pass@]host:port,host:port/mastername[?opts]
 *   redis+cluster://[user:pass@]host:port,host:port[?opts]
 * Options: wait=<replicas>, waitTimeoutMs=<ms> (WAIT after each commit, on the slot owner's
 * connection with cluster),
 * requestTtlMs=<ms> (how long commit outcomes are remembered for resends), prefix=<key prefix>.
 */
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
  wait: number;
  waitTimeoutMs: number;
  requestTtlMs: number;
  prefix: string;
}

function fail(url: string, why: string): never {
  // The password is not repeated in the message.
  throw new Error(`invalid Redis store URL ${url.replace(/\/\/[^@/]*@/, '//***@')}: ${why}`);
}

function intParam(url: string, params: URLSearchParams, name: string, fallback: number, min: number): number {
  const raw = params.get(name);
  if (raw === null) return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < min)
    fail(url, `${name} must be an integer >= ${min}, got ${JSON.stringify(raw)}`);
  return Number(raw);
}

export function parseRedisUrl(url: string): RedisTarget {
  const m =
    /^(redis|rediss|redis\+sentinel|redis\+cluster):\/\/(?:([^@/]*)@)?([^/?#]*)(\/[^?#]*)?(\?[^#]*)?$/.exec(
      url,
    );
  if (m === null)
    fail(
      url,
      'expected redis://host:port, rediss://, redis+sentinel://h:p,h:p/master or redis+cluster://h:p,h:p',
    );
  const [, scheme, userinfo, hosts, path, query] = m;
  const mode =
    scheme === 'redis+sentinel' ? 'sentinel' : scheme === 'redis+cluster' ? 'cluster' : 'standalone';
  const endpoints = (hosts ?? '').split(',').map((hp) => {
    const hm = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(hp);
    if (hm === null) fail(url, `bad host:port ${JSON.stringify(hp)}`);
    const port = hm[2] === undefined ? (mode === 'sentinel' ? 26379 : 6379) : Number(hm[2]);
    if (port < 1 || port > 65535) fail(url, `bad port in ${JSON.stringify(hp)}`);
    return { host: hm[1]!.replace(/^\[|\]$/g, ''), port };
  });
  if (endpoints.length === 0 || hosts === '') fail(url, 'no host');
  if (mode === 'standalone' && endpoints.length > 1)
    fail(url, 'several hosts need redis+sentinel:// or redis+cluster://');
  let username: string | undefined;
  let password: string | undefined;
  if (userinfo !== undefined && userinfo !== '') {
    const i = userinfo.indexOf(':');
    if (i < 0) password = decodeURIComponent(userinfo);
    else {
      username = decodeURIComponent(userinfo.slice(0, i)) || undefined;
      password = decodeURIComponent(userinfo.slice(i + 1));
    }
  }
  const segment = (path ?? '').replace(/^\//, '');
  let db = 0;
  let sentinelMaster: string | undefined;
  if (mode === 'sentinel') {
    if (segment === '')
      fail(url, 'redis+sentinel:// needs the master name as path: redis+sentinel://h:p,h:p/mymaster');
    sentinelMaster = decodeURIComponent(segment);
  } else if (segment !== '') {
    if (mode === 'cluster') fail(url, 'Redis Cluster has no databases: remove the path');
    if (!/^\d+$/.test(segment)) fail(url, `database must be a number, got ${JSON.stringify(segment)}`);
    db = Number(segment);
  }
  const params = new URLSearchParams(query ?? '');
  for (const k of params.keys()) {
    if (!['wait', 'waitTimeoutMs', 'requestTtlMs', 'prefix'].includes(k))
      fail(url, `unknown option ${JSON.stringify(k)}`);
  }
  const wait = intParam(url, params, 'wait', 0, 0);
  return {
    mode,
    tls: scheme === 'rediss',
    endpoints,
    username,
    password,
    db,
    sentinelMaster,
    wait,
    waitTimeoutMs: intParam(url, params, 'waitTimeoutMs', 100, 0),
    requestTtlMs: intParam(url, params, 'requestTtlMs', 600_000, 1000),
    prefix: params.get('prefix') ?? 'kop',
  };
}
