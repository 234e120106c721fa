/**
 * Waiting on a Redis write that carries a validity (redis-scripts.ts validityPrologue): its
 * answer until local time `until`, after which no copy of the script can apply any more, and the
 * wait for that moment itself. The commit (redis-commit.ts) and the store's other writes
 * (redis-store.ts validWrite) report an unknown outcome only from then on.
 */
import { isCorruptionReply } from './redis-reply.js';
import { StoreUnavailableError } from './errors.js';
import { localNow } from './redis-clock.js';

/** A write whose outcome the first answer did not tell (it ran too late, or no answer came). */
export const UNKNOWN = Symbol('unknown');

/**
 * Waits for `attempt` until local time `until`: its outcome, or `failure` (an error that says
 * nothing about whether it applied; corruption is thrown, it says nothing was written), or
 * neither when it had not answered by then (it may still be running: its result is dropped).
 */
export async function untilOrUnknown<T>(
  attempt: Promise<T | typeof UNKNOWN>,
  until: number,
): Promise<{ outcome?: T; failure?: unknown }> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<typeof UNKNOWN>((resolve) => {
    timer = setTimeout(() => resolve(UNKNOWN), Math.max(0, until - localNow()));
  });
  try {
    const result = await Promise.race([attempt, late]);
    return result === UNKNOWN ? {} : { outcome: result };
  } catch (err) {
    if (isCorruptionReply(err) || err instanceof StoreUnavailableError) throw err;
    return { failure: err };
  } finally {
    clearTimeout(timer);
    attempt.catch(() => undefined);
  }
}

export async function sleepUntil(t: number): Promise<void> {
  // +1: the timer's granularity; the time must have passed, not nearly.
  for (let left = t - localNow(); left > 0; left = t - localNow())
    await new Promise((r) => setTimeout(r, left + 1));
}
