/**
 * Topic incarnations (topic-incarnations.ts): which stored offsets of a name belong to an older
 * topic of it, agreed by several proxy instances over one store and kept across a restart, against
 * a fake metadata source and clock. The same is compared with a Kafka 4.4 broker in
 * test/integration/offsets-topic-ids.test.ts.
 */
import { describe, expect, test } from 'vitest';
import { InternalGroupsHidden, TOPIC_INCARNATIONS_GROUP } from '../../backends/internal-groups.js';
import { MemoryData, MemoryStore } from '../../backends/memory-store.js';
import type { OffsetStore } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { defaultOffsetFetchRequest } from '../../protocol/messages/offset-fetch-request.js';
import { handleOffsetFetch } from './offset-fetch.js';
import { OlderTopicsHidden } from './older-topics-hidden.js';
import type { TopicEntry } from './topic-ids.js';
import { TopicIds } from './topic-ids.js';
import { TopicIncarnations, successor } from './topic-incarnations.js';

const MARGIN = 1_000;

/** The cluster as every instance's Metadata requests see it, and one clock for all. */
function world() {
  const w = { topics: [] as TopicEntry[], t: 100_000, data: new MemoryData() };
  return w;
}

/** A proxy instance: its topic-id cache and incarnations over the shared store. */
function instance(w: ReturnType<typeof world>) {
  const now = () => w.t;
  const ids = new TopicIds(() => Promise.resolve([...w.topics]), { now, maxAgeMs: 5_000 });
  const store = new MemoryStore(w.data);
  const inc = new TopicIncarnations(store, ids, { marginMs: MARGIN });
  /** A refresh now (as a v10 request or a fetch after the cache's age would cause). */
  const refresh = async () => {
    w.t += 5_000;
    await inc.hiddenBefore(['*']);
  };
  return { ids, inc, store, refresh };
}

async function commitAt(store: OffsetStore, group: string, topic: string, partition: number, at: number) {
  const outcome = await store.commit({
    group,
    requestId: `${group}/${topic}/${partition}/${at}`,
    writes: [
      {
        topic,
        partition,
        offset: BigInt(at),
        leaderEpoch: -1,
        metadata: '',
        commitTimestamp: BigInt(at),
        expireTimestamp: -1n,
      },
    ],
  });
  expect(outcome.status).toBe('ok');
}

describe('successor', () => {
  test('the first sighting hides nothing; a new id hides what came before the last sighting of the old', () => {
    const first = successor('A', undefined, undefined, 5_000, MARGIN);
    expect(first).toEqual({ id: 'A', since: 0n, seen: 5_000, retired: [], generation: 1n });
    const known = { ...first, seen: 9_000 };
    expect(successor('B', first, known, 12_000, MARGIN)).toEqual({
      id: 'B',
      since: 8_000n,
      seen: 12_000,
      retired: ['A'],
      generation: 2n,
    });
    // Without this instance's sightings, the record's own is the bound.
    expect(successor('B', first, undefined, 12_000, MARGIN).since).toBe(4_000n);
  });
});

describe('TopicIncarnations', () => {
  test('a name seen for the first time: every stored offset counts', async () => {
    const w = world();
    w.topics = [{ name: 't', id: 'ID1' }];
    const a = instance(w);
    await commitAt(a.store, 'g', 't', 0, 50_000);
    await a.refresh();
    expect(await a.inc.hiddenBefore(['t'])).toEqual(new Map());
    expect(a.inc.incarnationOf('t')).toMatchObject({ id: 'ID1', since: 0n });
  });

  test('re-created: offsets from before the last sighting of the old id are hidden, later ones count', async () => {
    const w = world();
    w.topics = [{ name: 't', id: 'ID1' }];
    const a = instance(w);
    await a.refresh();
    await commitAt(a.store, 'g', 't', 0, w.t + 100);
    await a.refresh(); // the old id seen after that commit
    const lastOld = w.t;
    w.topics = [{ name: 't', id: 'ID2' }];
    w.t += 2_000;
    // A commit by name to the new topic before any proxy noticed it: it must count.
    await commitAt(a.store, 'g', 't', 1, w.t);
    await a.refresh();
    expect(await a.inc.hiddenBefore(['t'])).toEqual(new Map([['t', BigInt(lastOld - MARGIN)]]));
    /** An OffsetFetch v9 of group g through `a`'s incarnations: each partition and its offset. */
    const fetched = async (
      topics: { name: string; topicId: string; partitionIndexes: number[] }[] | null,
    ) => {
      const res = await handleOffsetFetch(
        {
          ...defaultOffsetFetchRequest(),
          groups: [{ groupId: 'g', memberId: null, memberEpoch: -1, topics }],
        },
        9,
        { store: new OlderTopicsHidden(a.store, (t) => a.inc.hiddenBefore(t)) },
      );
      return res.groups[0]!.topics.flatMap((t) =>
        t.partitions.map((p) => `${t.name}/${p.partitionIndex}=${p.committedOffset}:${p.errorCode}`),
      );
    };
    expect(await fetched(null)).toEqual([`t/1=${lastOld + 2_000}:0`]);
    expect(await fetched([{ name: 't', topicId: '', partitionIndexes: [0, 1] }])).toEqual([
      't/0=-1:0',
      `t/1=${lastOld + 2_000}:0`,
    ]);
  });

  test('two instances agree on one record; the one that noticed first sets since', async () => {
    const w = world();
    w.topics = [{ name: 't', id: 'ID1' }];
    const a = instance(w);
    const b = instance(w);
    await b.refresh();
    await a.refresh();
    await a.refresh(); // a saw ID1 last, b earlier
    const lastOld = w.t;
    w.topics = [{ name: 't', id: 'ID2' }];
    await a.refresh();
    await b.refresh();
    expect(await b.inc.hiddenBefore(['t'])).toEqual(new Map([['t', BigInt(lastOld - MARGIN)]]));
    expect(b.inc.incarnationOf('t')).toMatchObject({ id: 'ID2', generation: 2n });
  });

  test('both instances noticing at once: one record wins, the other takes it', async () => {
    const w = world();
    w.topics = [{ name: 't', id: 'ID1' }];
    const a = instance(w);
    const b = instance(w);
    await b.refresh();
    await a.refresh(); // a saw ID1 later than b: their own bounds differ
    w.topics = [{ name: 't', id: 'ID2' }];
    w.t += 5_000;
    await Promise.all([a.inc.hiddenBefore(['t']), b.inc.hiddenBefore(['t'])]);
    const rows = await new MemoryStore(w.data).fetch(TOPIC_INCARNATIONS_GROUP, null);
    expect(rows.map((r) => r.offset)).toEqual([2n]);
    expect(a.inc.incarnationOf('t')).toEqual(b.inc.incarnationOf('t'));
  });

  test('after a restart the stored record answers, and a re-creation nobody saw is bounded by it', async () => {
    const w = world();
    w.topics = [{ name: 't', id: 'ID1' }];
    const a = instance(w);
    await a.refresh();
    const recorded = w.t;
    w.topics = [{ name: 't', id: 'ID2' }];
    w.t += 60_000;
    const restarted = instance(w);
    await restarted.refresh();
    expect(await restarted.inc.hiddenBefore(['t'])).toEqual(new Map([['t', BigInt(recorded - MARGIN)]]));
    const again = instance(w);
    await again.refresh();
    expect(again.inc.incarnationOf('t')).toEqual({
      ...restarted.inc.incarnationOf('t'),
      seen: w.t,
    });
  });

  test('an old id listed again (a broker whose metadata lags) is not taken back', async () => {
    const w = world();
    w.topics = [{ name: 't', id: 'ID1' }];
    const a = instance(w);
    await a.refresh();
    w.topics = [{ name: 't', id: 'ID2' }];
    await a.refresh();
    const after = a.inc.incarnationOf('t');
    w.topics = [{ name: 't', id: 'ID1' }];
    await a.refresh();
    const fresh = instance(w);
    await fresh.refresh();
    expect(a.inc.incarnationOf('t')).toMatchObject({ id: 'ID2', since: after!.since });
    expect(fresh.inc.incarnationOf('t')).toMatchObject({ id: 'ID2', since: after!.since });
  });

  test('a deleted topic re-created while no refresh listed it: its last sighting bounds since', async () => {
    const w = world();
    w.topics = [{ name: 't', id: 'ID1' }];
    const a = instance(w);
    await a.refresh();
    const lastOld = w.t;
    w.topics = [];
    await a.refresh();
    await a.refresh();
    w.topics = [{ name: 't', id: 'ID2' }];
    await a.refresh();
    expect(await a.inc.hiddenBefore(['t'])).toEqual(new Map([['t', BigInt(lastOld - MARGIN)]]));
  });

  test('names the cluster never had (mirrored offsets) and an unreadable record hide nothing', async () => {
    const w = world();
    const raw = new MemoryStore(w.data);
    await raw.commit({
      group: TOPIC_INCARNATIONS_GROUP,
      requestId: 'by-hand',
      writes: [
        {
          topic: 't',
          partition: 0,
          offset: 7n,
          leaderEpoch: -1,
          metadata: 'x',
          commitTimestamp: 9n,
          expireTimestamp: -1n,
        },
      ],
    });
    w.topics = [{ name: 't', id: 'ID1' }];
    const a = instance(w);
    await a.refresh();
    expect(await a.inc.hiddenBefore(['t', 'elsewhere'])).toEqual(new Map());
    expect(a.inc.incarnationOf('t')).toMatchObject({ id: 'ID1', since: 0n, generation: 8n });
  });

  test('a store that fails leaves what the instance knows; reads still answer', async () => {
    const w = world();
    w.topics = [{ name: 't', id: 'ID1' }];
    const store = new MemoryStore(w.data);
    const ids = new TopicIds(() => Promise.resolve([...w.topics]), { now: () => w.t });
    const inc = new TopicIncarnations(store, ids);
    await store.close();
    await expect(inc.hiddenBefore(['t'])).resolves.toEqual(new Map());
  });
});

describe('InternalGroupsHidden', () => {
  test('clients and tools never see or change the internal group', async () => {
    const data = new MemoryData();
    const raw = new MemoryStore(data);
    await commitAt(raw, TOPIC_INCARNATIONS_GROUP, 't', 0, 1);
    await commitAt(raw, 'g', 't', 0, 1);
    const hidden = InternalGroupsHidden.over(raw);
    expect(InternalGroupsHidden.over(hidden)).toBe(hidden);
    expect(await hidden.listGroups()).toEqual(['g']);
    expect(await hidden.fetch(TOPIC_INCARNATIONS_GROUP, null)).toEqual([]);
    expect(await hidden.getGroup(TOPIC_INCARNATIONS_GROUP)).toBeNull();
    const refused = await hidden.commit({
      group: TOPIC_INCARNATIONS_GROUP,
      requestId: 'client',
      writes: [
        {
          topic: 't',
          partition: 0,
          offset: 99n,
          leaderEpoch: -1,
          metadata: '',
          commitTimestamp: 1n,
          expireTimestamp: -1n,
        },
      ],
    });
    expect(refused).toEqual({ status: 'fenced', error: ErrorCode.GROUP_ID_NOT_FOUND });
    await hidden.deleteGroup(TOPIC_INCARNATIONS_GROUP);
    await hidden.deleteOffsets(TOPIC_INCARNATIONS_GROUP, [{ topic: 't', partition: 0 }]);
    expect((await raw.fetch(TOPIC_INCARNATIONS_GROUP, null)).map((o) => o.offset)).toEqual([1n]);
  });
});
