/**
 * The topic id ↔ name cache of v10 (topic-ids.ts) against a fake metadata source and clock: what
 * needs a Metadata request, how often a miss may cause one, and a topic re-created under its name.
 */
import { describe, expect, test } from 'vitest';
import type { TopicEntry } from './topic-ids.js';
import { TopicIds } from './topic-ids.js';
import { ZERO_UUID } from '../../protocol/generated-support.js';

function source(initial: TopicEntry[]) {
  const state = { topics: initial, calls: 0, fail: false };
  const list = () => {
    state.calls++;
    return state.fail ? Promise.reject(new Error('no broker')) : Promise.resolve(state.topics);
  };
  return { state, list };
}

function clock() {
  const c = { t: 1_000, now: () => c.t };
  return c;
}

describe('TopicIds', () => {
  test('maps ids to names and names to ids from one Metadata request', async () => {
    const { state, list } = source([
      { name: 'a', id: 'ID-A' },
      { name: 'b', id: 'ID-B' },
    ]);
    const ids = new TopicIds(list, { now: clock().now });
    expect(await ids.namesOf(['ID-A', 'ID-B'])).toEqual(
      new Map([
        ['ID-A', 'a'],
        ['ID-B', 'b'],
      ]),
    );
    expect(await ids.idsOf(['b'])).toEqual(new Map([['b', 'ID-B']]));
    expect(state.calls).toBe(1);
  });

  test('an unknown id refreshes once, finds a topic created since, and is left out otherwise', async () => {
    const c = clock();
    const { state, list } = source([{ name: 'a', id: 'ID-A' }]);
    const ids = new TopicIds(list, { now: c.now, missGapMs: 500 });
    await ids.namesOf(['ID-A']);
    state.topics = [...state.topics, { name: 'new', id: 'ID-NEW' }];
    c.t += 1; // a client commits with an id it has just read from Metadata
    expect(await ids.namesOf(['ID-NEW', 'ID-NONE'])).toEqual(new Map([['ID-NEW', 'new']]));
    expect(state.calls).toBe(2);
  });

  test('an id a refresh did not find is not asked for again within the gap: retries of it cost no requests', async () => {
    const c = clock();
    const { state, list } = source([{ name: 'a', id: 'ID-A' }]);
    const ids = new TopicIds(list, { now: c.now, missGapMs: 500 });
    expect((await ids.namesOf(['ID-NONE'])).size).toBe(0); // the first refresh did not find it
    for (let i = 0; i < 20; i++) {
      c.t += 10;
      expect((await ids.namesOf(['ID-NONE'])).size).toBe(0);
    }
    expect(state.calls).toBe(1);
    // Another unknown id is asked for once.
    expect((await ids.namesOf(['ID-OTHER', 'ID-NONE'])).size).toBe(0);
    expect(state.calls).toBe(2);
    c.t += 300;
    await ids.namesOf(['ID-NONE']);
    expect(state.calls).toBe(3);
  });

  test('a topic deleted and re-created under its name: the old id is gone, the new one maps to the name', async () => {
    const c = clock();
    const { state, list } = source([{ name: 't', id: 'OLD' }]);
    const ids = new TopicIds(list, { now: c.now, missGapMs: 0 });
    expect(await ids.namesOf(['OLD'])).toEqual(new Map([['OLD', 't']]));
    state.topics = [{ name: 't', id: 'NEW' }];
    expect(await ids.namesOf(['NEW'])).toEqual(new Map([['NEW', 't']]));
    expect((await ids.namesOf(['OLD'])).size).toBe(0);
    expect(await ids.idsOf(['t'])).toEqual(new Map([['t', 'NEW']]));
  });

  test("an old cache is refreshed before it answers: a re-created topic's old id is no longer taken", async () => {
    const c = clock();
    const { state, list } = source([{ name: 't', id: 'OLD' }]);
    const ids = new TopicIds(list, { now: c.now, maxAgeMs: 1_000 });
    await ids.namesOf(['OLD']);
    state.topics = [{ name: 't', id: 'NEW' }];
    c.t += 999;
    expect((await ids.namesOf(['OLD'])).get('OLD')).toBe('t'); // within the age: the cache answers
    c.t += 1;
    expect((await ids.namesOf(['OLD'])).size).toBe(0);
    expect(state.calls).toBe(2);
  });

  test('an old cache answers known ids when the broker fails or does not answer in time', async () => {
    const c = clock();
    const { state, list } = source([{ name: 'a', id: 'ID-A' }]);
    let frozen = false;
    const ids = new TopicIds(() => (frozen ? new Promise<TopicEntry[]>(() => {}) : list()), {
      now: c.now,
      maxAgeMs: 1_000,
      staleWaitMs: 20,
    });
    await ids.namesOf(['ID-A']);
    state.fail = true; // the broker refuses
    c.t += 5_000;
    expect(await ids.namesOf(['ID-A'])).toEqual(new Map([['ID-A', 'a']]));
    frozen = true; // the broker stops answering
    expect(await ids.namesOf(['ID-A'])).toEqual(new Map([['ID-A', 'a']]));
    expect(state.calls).toBe(2);
  });

  test('a lookup the cache cannot answer rejects when the cluster cannot be asked', async () => {
    const { state, list } = source([]);
    state.fail = true;
    const ids = new TopicIds(list, { now: clock().now });
    await expect(ids.namesOf(['X'])).rejects.toThrow('no broker');
  });

  test('concurrent misses share one refresh; topics without an id (old brokers) are not mapped', async () => {
    const { state, list } = source([
      { name: 'a', id: 'ID-A' },
      { name: 'old', id: ZERO_UUID },
    ]);
    const ids = new TopicIds(list, { now: clock().now });
    const [x, y] = await Promise.all([ids.namesOf(['ID-A']), ids.namesOf([ZERO_UUID])]);
    expect(x.get('ID-A')).toBe('a');
    expect(y.size).toBe(0);
    expect(state.calls).toBe(1);
    expect((await ids.idsOf(['old'])).size).toBe(0);
  });

  test('fresh(): refreshes an old cache, waits for a cluster that does not answer only once', async () => {
    const c = clock();
    let hang = false;
    let calls = 0;
    const seen: number[] = [];
    const ids = new TopicIds(
      () => {
        calls++;
        return hang
          ? new Promise<TopicEntry[]>(() => undefined)
          : Promise.resolve([{ name: 'a', id: 'ID-A' }]);
      },
      { now: c.now, staleWaitMs: 50 },
    );
    ids.onRefresh((_topics, sentAt) => seen.push(sentAt));
    await ids.fresh();
    await ids.fresh();
    expect(calls).toBe(1);
    expect(seen).toEqual([1_000]);
    c.t += 5_000;
    hang = true;
    await ids.fresh(); // waits the 50 ms, the refresh still outstanding
    c.t += 50;
    let done = false;
    void ids.fresh().then(() => (done = true)); // does not wait for it again
    await new Promise((resolve) => setImmediate(resolve));
    expect(done).toBe(true);
    expect(calls).toBe(2);
  });
});
