// A real store behind a switch: while the outage is on, every read and write fails as a store that
// cannot be reached fails (StoreUnavailableError), and nothing reaches the store. The guard's
// differential runs use it to lose an observation (a static member's leave written while the store
// is down) without stopping a server other targets share.
import { StoreUnavailableError } from '../../backends/errors.js';
import type { OffsetStore } from '../../backends/store.js';

export class StoreOutage {
  down = false;

  /** Runs `op` with the store down. */
  async during<T>(op: () => Promise<T>): Promise<T> {
    this.down = true;
    try {
      return await op();
    } finally {
      this.down = false;
    }
  }
}

/** The operations that talk to the store (the rest, `kind` and `close`, are the client's own). */
const REACHES_STORE: ReadonlySet<PropertyKey> = new Set([
  'commit',
  'fetch',
  'deleteOffsets',
  'deleteGroup',
  'listGroups',
  'lease',
  'releaseLease',
  'getGroup',
  'updateGroup',
  'ensureMarker',
  'readMarker',
]);

export function withOutage<S extends OffsetStore>(store: S, outage: StoreOutage): S {
  return new Proxy(store, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function' || !REACHES_STORE.has(prop)) return value;
      const method = value as (...args: unknown[]) => unknown;
      return (...args: unknown[]) =>
        outage.down
          ? Promise.reject(new StoreUnavailableError(`store down (test outage): ${String(prop)}`))
          : method.apply(target, args);
    },
  });
}
