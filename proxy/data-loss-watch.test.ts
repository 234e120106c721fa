import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../backends/memory-store.js';
import type { OffsetStore } from '../backends/store.js';
import { DataLossWatch } from './data-loss-watch.js';
import { silentLogger } from './logger.js';

/** A memory store with a marker that a test can wipe, replace or make unreadable. */
function markedStore() {
  const state = { marker: null as string | null, down: false, reconnect: () => undefined as void };
  const store = Object.assign(new MemoryStore(), {
    ensureMarker: async (candidate: string) => {
      if (state.down) throw new Error('down');
      state.marker ??= candidate;
      return new Map([['m', state.marker]]);
    },
    readMarker: async () => {
      if (state.down) throw new Error('down');
      return new Map([['m', state.marker]]);
    },
    onReconnect: (listener: () => void) => {
      state.reconnect = listener;
    },
  }) as OffsetStore;
  return { store, state };
}

const settle = () => new Promise((r) => setTimeout(r, 20));

describe('DataLossWatch', () => {
  it('a store that cannot be read is not a loss; a gone marker is, once, and for good', async () => {
    const { store, state } = markedStore();
    const lost: string[] = [];
    const watch = new DataLossWatch({
      store,
      log: silentLogger,
      intervalMs: 60_000,
      onLost: (r) => lost.push(r),
    });
    state.down = true;
    watch.start();
    await settle();
    await expect(watch.check()).resolves.toBeUndefined();
    state.down = false;
    await new Promise((r) => setTimeout(r, 1_050));
    await watch.check(); // writes the marker now
    expect(state.marker).not.toBeNull();
    state.marker = null;
    state.reconnect();
    await settle();
    await expect(watch.check()).rejects.toThrow(/lost its data: marker m is gone/);
    state.marker = 'restored';
    state.reconnect();
    await settle();
    await expect(watch.check()).rejects.toThrow(/marker m is gone/);
    expect(lost).toEqual(['marker m is gone']);
    watch.stop();
  });

  it('a marker another proxy wrote after a loss counts as replaced', async () => {
    const { store, state } = markedStore();
    state.marker = 'theirs';
    const watch = new DataLossWatch({ store, log: silentLogger, intervalMs: 60_000 });
    watch.start();
    await settle();
    await expect(watch.check()).resolves.toBeUndefined();
    state.marker = 'new';
    state.reconnect();
    await settle();
    await expect(watch.check()).rejects.toThrow(/marker m was replaced \("new", this proxy found "theirs"\)/);
    watch.stop();
  });

  it('does nothing for a store without a marker', async () => {
    const watch = new DataLossWatch({ store: new MemoryStore(), log: silentLogger });
    expect(watch.active).toBe(false);
    watch.start();
    await expect(watch.check()).resolves.toBeUndefined();
    watch.stop();
  });
});
