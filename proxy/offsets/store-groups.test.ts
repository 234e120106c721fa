/**
 * The store's groups as group tools see them (store-groups.ts): only groups with offsets, the
 * protocol their members last used, one snapshot per TTL, and coordinators cached per group.
 */
import { describe, expect, test } from 'vitest';
import { MemoryStore } from '../../backends/memory-store.js';
import { StoreGroupIndex } from './store-groups.js';
import type { CoordinatorSource } from './store-groups.js';
import { storeOffset } from '../../test/harness/stored-offsets.js';

function cluster(nodeOf: Record<string, number>): CoordinatorSource & { asked: string[][] } {
  const asked: string[][] = [];
  return {
    asked,
    coordinatorsOf: async (groups) => {
      asked.push([...groups]);
      return new Map(groups.filter((g) => g in nodeOf).map((g) => [g, nodeOf[g]!]));
    },
  };
}

function clock() {
  const c = { t: 0, now: () => c.t };
  return c;
}

describe('StoreGroupIndex', () => {
  test('groups with offsets, with the protocol the store recorded; a membership record alone is not one', async () => {
    const store = new MemoryStore();
    await storeOffset(store, 'simple', 't', 0);
    await storeOffset(store, 'classic', 't', 0);
    await store.updateGroup('classic', {
      kind: 'joined',
      generationId: 1,
      memberId: 'm',
      groupInstanceId: null,
      members: [{ memberId: 'm', groupInstanceId: null }],
    });
    await storeOffset(store, 'kip848', 't', 0);
    await store.updateGroup('kip848', { kind: 'member-epoch', memberId: 'm', memberEpoch: 1, exact: true });
    await store.updateGroup('no-offsets', {
      kind: 'member-epoch',
      memberId: 'm',
      memberEpoch: 1,
      exact: true,
    });
    const index = new StoreGroupIndex(store, cluster({}));
    expect([...(await index.groups()).values()].sort((a, b) => a.group.localeCompare(b.group))).toEqual([
      { group: 'classic', protocol: 'classic' },
      { group: 'kip848', protocol: 'consumer' },
      { group: 'simple', protocol: null },
    ]);
    expect(await index.get('no-offsets')).toBeUndefined();
    expect(await index.get('simple')).toEqual({ group: 'simple', protocol: null });
  });

  test('one snapshot per TTL, built once for concurrent callers; drop forgets at once', async () => {
    const store = new MemoryStore();
    await storeOffset(store, 'a', 't', 0);
    let walks = 0;
    const list = store.listGroups.bind(store);
    store.listGroups = () => {
      walks++;
      return list();
    };
    const c = clock();
    const index = new StoreGroupIndex(store, cluster({}), 1_000, 30_000, c.now);
    const [x, y] = await Promise.all([index.groups(), index.groups()]);
    expect(x).toBe(y);
    expect(walks).toBe(1);
    await storeOffset(store, 'b', 't', 0);
    c.t = 999;
    expect([...(await index.groups()).keys()]).toEqual(['a']);
    index.drop('a');
    expect(await index.get('a')).toBeUndefined();
    c.t = 1_000;
    expect([...(await index.groups()).keys()].sort()).toEqual(['a', 'b']);
    expect(walks).toBe(2);
  });

  test('a walk over many groups completes (it yields to the event loop on the way)', async () => {
    const store = new MemoryStore();
    for (let i = 0; i < 120; i++) await storeOffset(store, `g${i}`, 't', 0);
    expect((await new StoreGroupIndex(store, cluster({})).groups()).size).toBe(120);
  });

  test('coordinators: asked only for groups not cached, unknown ones left out, cached for their TTL', async () => {
    const c = clock();
    const source = cluster({ a: 1, b: 2 });
    const index = new StoreGroupIndex(new MemoryStore(), source, 5_000, 30_000, c.now);
    expect(await index.coordinatorsOf(['a', 'x'])).toEqual(new Map([['a', 1]]));
    expect(await index.coordinatorsOf(['a', 'b'])).toEqual(
      new Map([
        ['a', 1],
        ['b', 2],
      ]),
    );
    expect(source.asked).toEqual([['a', 'x'], ['b']]);
    c.t = 30_000;
    await index.coordinatorsOf(['a']);
    expect(source.asked.at(-1)).toEqual(['a']);
  });
});
