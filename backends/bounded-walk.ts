/**
 * Walks over many items that give the event loop back every `pageSize` items, so a listing,
 * export or sweep of any size never holds the loop: /healthz, other clients' requests and signal
 * handlers run between pages.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';

export const WALK_PAGE = 1000;

/**
 * Calls `visit` for every item of `items` (a synchronous iterator, e.g. an LMDB range with its
 * snapshot), yielding to the event loop after every `pageSize` items. The iterator is finished or
 * returned (its read transaction released) whatever happens.
 */
export async function walkInPages<T>(
  items: Iterable<T>,
  visit: (item: T) => void,
  pageSize = WALK_PAGE,
): Promise<void> {
  let n = 0;
  for (const item of items) {
    visit(item);
    if (++n % pageSize === 0) await nextTurn();
  }
}
