/**
 * Parses the ZooKeeper store URL, `zk://[user:password@]host:port[,host:port...][/chroot][?maxMultiBytes=N]`.
 * Kept apart from the store so the configuration can check a URL without loading the client.
 * `user:password@` authenticates the session with ZooKeeper's digest scheme (for a chroot whose
 * ACLs require it); no error message repeats it.
 */
import { redactUrl } from './redact-url.js';
import { StoreUrlError } from './errors.js';

/** Smallest accepted maxMultiBytes: a multi must hold the fence, the marker and a partition. */
export const MIN_MULTI_BYTES = 1024;

export interface ZooKeeperTarget {
  connectString: string;
  chroot: string;
  maxMultiBytes?: number;
  /** `user:password` for the digest scheme. */
  digest?: string;
}

export function parseZooKeeperUrl(url: string): ZooKeeperTarget {
  const fail = (why: string): never => {
    throw new StoreUrlError('invalid ZooKeeper store URL', redactUrl(url), why);
  };
  /** A piece of the URL for an error message, only if it survives redaction (it may hold a password). */
  const shown = (piece: string): string =>
    redactUrl(url).includes(piece) ? JSON.stringify(piece) : '(a part that may hold a password)';
  const m = /^zk:\/\/(?:([^?#]*)@)?([^/?#@]+)(\/[^?#]*)?(?:\?([^#]*))?$/.exec(url);
  if (m === null) fail('expected zk://[user:password@]host:port[,host:port...][/chroot][?maxMultiBytes=N]');
  const [, userinfo, hosts, path, query] = m!;
  let digest: string | undefined;
  if (userinfo !== undefined) {
    const colon = userinfo.indexOf(':');
    if (colon <= 0) fail('the userinfo must be user:password (ZooKeeper digest authentication)');
    try {
      digest = `${decodeURIComponent(userinfo.slice(0, colon))}:${decodeURIComponent(userinfo.slice(colon + 1))}`;
    } catch {
      fail('bad percent-encoding in the userinfo');
    }
  }
  for (const hp of hosts!.split(',')) {
    const hm = /^[^:,]+:(\d{1,5})$/.exec(hp);
    if (hm === null || Number(hm[1]) < 1 || Number(hm[1]) > 65535) fail(`bad host:port ${shown(hp)}`);
  }
  const chroot = (path ?? '').replace(/\/+$/, '');
  if (chroot.split('/').some((s, i) => i > 0 && (s === '' || s === '.' || s === '..')))
    fail(`bad chroot ${shown(chroot)}`);
  const params = new URLSearchParams(query ?? '');
  for (const k of params.keys()) if (k !== 'maxMultiBytes') fail(`unknown option ${shown(k)}`);
  const target: ZooKeeperTarget = { connectString: hosts!, chroot };
  if (digest !== undefined) target.digest = digest;
  const raw = params.get('maxMultiBytes');
  if (raw === null) return target;
  if (!/^\d{1,10}$/.test(raw) || Number(raw) < MIN_MULTI_BYTES)
    fail(`maxMultiBytes must be an integer >= ${MIN_MULTI_BYTES}, got ${shown(raw)}`);
  target.maxMultiBytes = Number(raw);
  return target;
}
