/**
 * A store URL whose password is empty: `redis://:@redis:6379` or `?password=` is what
 * `redis://:${REDIS_PASSWORD}@redis:6379` becomes when the variable is unset (or Kubernetes'
 * `$(STORE_PASSWORD)` when the Secret's key is empty). The store would be opened without
 * authentication, or refuse it with a less telling error later; refused at start instead.
 */
import type { StoreTarget } from '../../backends/open-store.js';

/** Why the store URL's password is unusable, or undefined. */
export function emptyStorePassword(target: StoreTarget): string | undefined {
  const why = (where: string): string =>
    `the ${where} is empty (an unset variable in the URL?); give the password, or no userinfo at all`;
  if (target.kind === 'redis') {
    if (target.redis.password === '') return why('password');
    if (target.redis.sentinelPassword === '') return why('sentinelPassword');
  }
  if (target.kind === 'zookeeper' && target.zookeeper.digest?.endsWith(':')) return why('password');
  return undefined;
}
