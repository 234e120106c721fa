/**
 * The code of a Redis error reply. By the protocol an error reply's first word is its code
 * (`WRONGTYPE Operation against a key ...`, `MOVED 3999 h:p`), and Redis 7 keeps the code of an
 * error raised inside a script, so this is the one place that reads it; everything else switches
 * on the closed union. Only ioredis's ReplyError is a reply: its own failures (a closed
 * connection, retries used up) and socket errors are not, and carry classes or `code` fields.
 *
 * The class is told by its name (redis-errors' classes name themselves after their constructor),
 * not by `instanceof`: connection-problem.ts reads codes for every store, and importing ioredis
 * here loaded the whole client into a proxy on the embedded store (11.8 MB of RSS at rest,
 * docs/benchmarks.md).
 */

const KNOWN = [
  'ERR',
  // The store's own scripts: a key holds something that is not one of its records.
  'KOPCORRUPT',
  'WRONGTYPE',
  'NOAUTH',
  'WRONGPASS',
  'NOPERM',
  'READONLY',
  'MASTERDOWN',
  'LOADING',
  'BUSY',
  'NOSCRIPT',
  'OOM',
  'MISCONF',
  'NOREPLICAS',
  'EXECABORT',
  'MOVED',
  'ASK',
  'TRYAGAIN',
  'CLUSTERDOWN',
] as const;

/** OTHER: a reply whose first word is none of these (a newer server's code, a module's). */
export type RedisReplyCode = (typeof KNOWN)[number] | 'OTHER';

const KNOWN_CODES: ReadonlySet<string> = new Set(KNOWN);

/** The reply's code, or null when `err` is not an error reply of a Redis server. */
export function redisReplyCode(err: unknown): RedisReplyCode | null {
  if (!(err instanceof Error) || err.name !== 'ReplyError') return null;
  const word = String(err.message).split(' ', 1)[0]!;
  return KNOWN_CODES.has(word) ? (word as RedisReplyCode) : 'OTHER';
}

/** Whether Redis refused because the group's keys hold something other than the store's records. */
export function isCorruptionReply(err: unknown): boolean {
  switch (redisReplyCode(err)) {
    case 'WRONGTYPE':
    case 'KOPCORRUPT':
      return true;
    default:
      return false;
  }
}
