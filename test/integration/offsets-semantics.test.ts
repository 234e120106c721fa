// The offset APIs answered by the proxy, byte for byte on the wire, against a real broker running
// the group: versions, error placement, fencing of a real group's members, compare-and-set,
// unknown-topic policy, OffsetDelete and DeleteGroups. The store is the embedded one.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import type { Consumer } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { EmbeddedStore } from '../../backends/embedded-store.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { defaultOffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';
import type { OffsetCommitResponse } from '../../protocol/messages/offset-commit-response.js';
import { defaultOffsetDeleteRequest } from '../../protocol/messages/offset-delete-request.js';
import type { OffsetDeleteResponse } from '../../protocol/messages/offset-delete-response.js';
import { defaultOffsetFetchRequest } from '../../protocol/messages/offset-fetch-request.js';
import type { OffsetFetchResponse } from '../../protocol/messages/offset-fetch-response.js';
import { createTopics } from '../bed/clients/kafkajs.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { startOffsetProxy } from '../harness/offset-proxy.js';
import type { OffsetProxy } from '../harness/offset-proxy.js';
import { RawClient } from '../harness/raw-client.js';
import { Conn, topicIds } from '../harness/group-members.js';
import { ZERO_UUID } from '../../protocol/generated-support.js';

const E = {
  NONE: 0,
  UNKNOWN_TOPIC_OR_PARTITION: 3,
  OFFSET_METADATA_TOO_LARGE: 12,
  ILLEGAL_GENERATION: 22,
  UNKNOWN_MEMBER_ID: 25,
  CAS_MISMATCH: 28,
  GROUP_ID_NOT_FOUND: 69,
  GROUP_SUBSCRIBED_TO_TOPIC: 86,
};

interface CommitArgs {
  group: string;
  topic: string;
  /** The topic's id, for v10 (which names topics by id). */
  topicId?: string;
  partitions: { partition: number; offset: bigint; metadata?: string | null; leaderEpoch?: number }[];
  generation?: number;
  memberId?: string;
}

function commitBody(version: number, a: CommitArgs): unknown {
  return {
    ...defaultOffsetCommitRequest(),
    groupId: a.group,
    generationIdOrMemberEpoch: a.generation ?? -1,
    memberId: a.memberId ?? '',
    topics: [
      {
        name: a.topic,
        topicId: a.topicId ?? ZERO_UUID,
        partitions: a.partitions.map((p) => ({
          partitionIndex: p.partition,
          committedOffset: p.offset,
          committedLeaderEpoch: version >= 6 ? (p.leaderEpoch ?? -1) : -1,
          committedMetadata: p.metadata === undefined ? '' : p.metadata,
        })),
      },
    ],
  };
}

let correlation = 1;

async function commit(client: RawClient, version: number, a: CommitArgs): Promise<number[]> {
  const r = await client.request<OffsetCommitResponse>(
    ApiKey.OffsetCommit,
    version,
    correlation++,
    commitBody(version, a),
  );
  return r.topics.flatMap((t) => t.partitions.map((p) => p.errorCode));
}

/** The error code of each committed partition, by "topic/partition" (a broker may answer in another order). */
async function commitByPartition(
  client: RawClient,
  version: number,
  a: CommitArgs,
): Promise<Record<string, number>> {
  const r = await client.request<OffsetCommitResponse>(
    ApiKey.OffsetCommit,
    version,
    correlation++,
    commitBody(version, a),
  );
  return Object.fromEntries(
    r.topics.flatMap((t) => t.partitions.map((p) => [`${t.name}/${p.partitionIndex}`, p.errorCode])),
  );
}

async function fetchV8(client: RawClient, group: string, topic: string | null, partitions: number[]) {
  const r = await client.request<OffsetFetchResponse>(ApiKey.OffsetFetch, 8, correlation++, {
    ...defaultOffsetFetchRequest(),
    groups: [
      {
        groupId: group,
        memberId: null,
        memberEpoch: -1,
        topics: topic === null ? null : [{ name: topic, partitionIndexes: partitions }],
      },
    ],
  });
  return r.groups[0]!;
}

describe('offset APIs answered by the proxy (embedded store)', () => {
  const brokerBootstrap = inject('kafkaBootstrap');
  let dir: string;
  let store: EmbeddedStore;
  let proxy: OffsetProxy;
  let client: RawClient;
  let topic: string;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'kop-semantics-'));
    store = new EmbeddedStore({ dataDir: dir });
    proxy = await startOffsetProxy(brokerBootstrap, store);
    client = await RawClient.connect(proxy.bootstrap);
    topic = uniqueName('sem');
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 3, replicationFactor: 1 }]);
  });
  afterAll(async () => {
    client?.close();
    await proxy?.stop();
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('a group with no commits fetches -1, leader epoch -1, metadata "" and NONE, in v1, v5 and v8', async () => {
    const group = uniqueName('nothing');
    const v1 = await client.request<OffsetFetchResponse>(ApiKey.OffsetFetch, 1, correlation++, {
      ...defaultOffsetFetchRequest(),
      groupId: group,
      topics: [{ name: topic, partitionIndexes: [0, 1] }],
    });
    expect(v1.topics[0]!.partitions.map((p) => [p.committedOffset, p.metadata, p.errorCode])).toEqual([
      [-1n, '', 0],
      [-1n, '', 0],
    ]);
    const v5 = await client.request<OffsetFetchResponse>(ApiKey.OffsetFetch, 5, correlation++, {
      ...defaultOffsetFetchRequest(),
      groupId: group,
      topics: [{ name: topic, partitionIndexes: [2] }],
    });
    expect(v5.errorCode).toBe(0);
    expect(v5.topics[0]!.partitions[0]).toMatchObject({
      committedOffset: -1n,
      committedLeaderEpoch: -1,
      metadata: '',
    });
    const v8 = await fetchV8(client, group, null, []);
    expect(v8).toMatchObject({ errorCode: 0, topics: [] });
  });

  test('commits in every version land in the store by name and read back, with epochs and metadata', async () => {
    const group = uniqueName('versions');
    // v0-1 left the codec with Kafka 4.0's specs (KIP-896); v10 names the topic by its id.
    const admin = await Conn.open(brokerBootstrap);
    const topicId = (await topicIds(admin, [topic]).finally(() => admin.close())).get(topic)!;
    for (const version of [2, 5, 6, 8, 9, 10]) {
      const codes = await commit(client, version, {
        group,
        topic,
        topicId,
        partitions: [
          { partition: 0, offset: BigInt(100 + version), metadata: `v${version} ✓`, leaderEpoch: 7 },
        ],
      });
      expect(codes, `OffsetCommit v${version}`).toEqual([E.NONE]);
      const [stored] = await store.fetch(group, [{ topic, partition: 0 }]);
      expect(stored!.offset).toBe(BigInt(100 + version));
      expect(stored!.metadata).toBe(`v${version} ✓`);
      expect(stored!.leaderEpoch).toBe(version >= 6 ? 7 : -1);
      expect(Number(stored!.commitTimestamp)).toBeGreaterThan(Date.now() - 60_000);
    }
    const fetched = await fetchV8(client, group, topic, [0, 1]);
    expect(
      fetched.topics[0]!.partitions.map((p) => [p.committedOffset, p.committedLeaderEpoch, p.metadata]),
    ).toEqual([
      [110n, 7, 'v10 ✓'],
      [-1n, -1, ''],
    ]);
    const all = await fetchV8(client, group, null, []);
    expect(all.topics).toHaveLength(1);
    expect(all.topics[0]!.partitions.map((p) => p.partitionIndex)).toEqual([0]);
  });

  test('metadata over 4096 characters is refused for that partition only', async () => {
    const group = uniqueName('large');
    const codes = await commit(client, 8, {
      group,
      topic,
      partitions: [
        { partition: 0, offset: 5n, metadata: 'x'.repeat(4097) },
        { partition: 1, offset: 6n, metadata: 'y'.repeat(4096) },
      ],
    });
    expect(codes).toEqual([E.OFFSET_METADATA_TOO_LARGE, E.NONE]);
    const stored = await store.fetch(group, null);
    expect(stored.map((o) => [o.partition, o.offset])).toEqual([[1, 6n]]);
  });

  test('a group the store never saw, committing with a generation: GROUP_ID_NOT_FOUND in v9, ILLEGAL_GENERATION in v8', async () => {
    const group = uniqueName('ghost');
    expect(
      await commit(client, 9, {
        group,
        topic,
        partitions: [{ partition: 0, offset: 1n }],
        generation: 3,
        memberId: 'm',
      }),
    ).toEqual([E.GROUP_ID_NOT_FOUND]);
    expect(
      await commit(client, 8, {
        group,
        topic,
        partitions: [{ partition: 0, offset: 1n }],
        generation: 3,
        memberId: 'm',
      }),
    ).toEqual([E.ILLEGAL_GENERATION]);
    expect(await store.fetch(group, null)).toEqual([]);
  });

  describe('fencing a real group run by the broker', () => {
    let consumer: Consumer;
    const group = uniqueName('fenced');

    beforeAll(async () => {
      const kafka = new Kafka({
        brokers: [proxy.bootstrap],
        logLevel: logLevel.NOTHING,
        clientId: 'fence-test',
      });
      consumer = kafka.consumer({ groupId: group, sessionTimeout: 10_000, heartbeatInterval: 500 });
      await consumer.connect();
      await consumer.subscribe({ topic, fromBeginning: true });
      await consumer.run({ eachMessage: async () => {} });
      const deadline = Date.now() + 30_000;
      while (Date.now() < deadline) {
        const state = await store.getGroup(group);
        if (state?.state === 'Stable' && state.members.length === 1) return;
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error('the group never became Stable in the store');
    });
    afterAll(async () => {
      await consumer?.disconnect();
    });

    test('the proxy recorded the generation and member from the broker responses', async () => {
      const state = (await store.getGroup(group))!;
      expect(state.protocol).toBe('classic');
      expect(state.generationId).toBeGreaterThanOrEqual(1);
      expect(state.members[0]!.memberId).toMatch(/^fence-test-/);
    });

    test('stale generation, unknown member and anonymous commits are refused; the live member commits', async () => {
      const state = (await store.getGroup(group))!;
      const member = state.members[0]!.memberId;
      const g = state.generationId;
      const p = [{ partition: 2, offset: 42n }];
      expect(
        await commit(client, 8, { group, topic, partitions: p, generation: g + 1, memberId: member }),
      ).toEqual([E.ILLEGAL_GENERATION]);
      expect(
        await commit(client, 8, { group, topic, partitions: p, generation: g, memberId: 'zombie-1' }),
      ).toEqual([E.UNKNOWN_MEMBER_ID]);
      // The broker confirms the group is not empty, so an assign()-style commit stays refused.
      expect(await commit(client, 8, { group, topic, partitions: p, generation: -1, memberId: '' })).toEqual([
        E.UNKNOWN_MEMBER_ID,
      ]);
      expect((await store.fetch(group, [{ topic, partition: 2 }])).map((o) => o.offset)).not.toContain(42n);
      expect(
        await commit(client, 8, { group, topic, partitions: p, generation: g, memberId: member }),
      ).toEqual([E.NONE]);
      expect((await store.fetch(group, [{ topic, partition: 2 }]))[0]!.offset).toBe(42n);
    });

    test('after the member leaves, the group is empty and admin-style commits are accepted', async () => {
      await consumer.disconnect();
      const deadline = Date.now() + 15_000;
      while ((await store.getGroup(group))!.members.length > 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
      }
      expect((await store.getGroup(group))!.members).toEqual([]);
      expect(await commit(client, 8, { group, topic, partitions: [{ partition: 1, offset: 7n }] })).toEqual([
        E.NONE,
      ]);
    });
  });

  test("a zombie: a member's commit with the generation it had before a rebalance is refused", async () => {
    const group = uniqueName('zombie');
    const kafka = new Kafka({
      brokers: [proxy.bootstrap],
      logLevel: logLevel.NOTHING,
      clientId: 'zombie-test',
    });
    const stable = async (members: number, newerThan: number) => {
      const deadline = Date.now() + 45_000;
      while (Date.now() < deadline) {
        const st = await store.getGroup(group);
        if (st?.state === 'Stable' && st.members.length === members && st.generationId > newerThan) return st;
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error(`group never reached ${members} Stable members`);
    };
    const a = kafka.consumer({ groupId: group, sessionTimeout: 10_000, heartbeatInterval: 300 });
    const b = kafka.consumer({ groupId: group, sessionTimeout: 10_000, heartbeatInterval: 300 });
    try {
      await a.connect();
      await a.subscribe({ topic, fromBeginning: true });
      await a.run({ eachMessage: async () => {} });
      const before = await stable(1, 0);
      const zombie = { generation: before.generationId, memberId: before.members[0]!.memberId };
      await b.connect();
      await b.subscribe({ topic, fromBeginning: true });
      await b.run({ eachMessage: async () => {} });
      const after = await stable(2, before.generationId);
      expect(after.members.map((m) => m.memberId)).toContain(zombie.memberId);
      const p = [{ partition: 0, offset: 999n }];
      expect(await commit(client, 8, { group, topic, partitions: p, ...zombie })).toEqual([
        E.ILLEGAL_GENERATION,
      ]);
      expect(await commit(client, 9, { group, topic, partitions: p, ...zombie })).toEqual([
        E.ILLEGAL_GENERATION,
      ]);
      expect((await store.fetch(group, [{ topic, partition: 0 }])).map((o) => o.offset)).not.toContain(999n);
      expect(
        await commit(client, 8, {
          group,
          topic,
          partitions: p,
          generation: after.generationId,
          memberId: zombie.memberId,
        }),
      ).toEqual([E.NONE]);
    } finally {
      await Promise.allSettled([a.disconnect(), b.disconnect()]);
    }
  });

  test("OffsetDelete: unknown group, then deletion of an empty group's offsets", async () => {
    const group = uniqueName('del');
    const del = (correlationId: number) =>
      client.request<OffsetDeleteResponse>(ApiKey.OffsetDelete, 0, correlationId, {
        ...defaultOffsetDeleteRequest(),
        groupId: group,
        topics: [{ name: topic, partitions: [{ partitionIndex: 0 }, { partitionIndex: 1 }] }],
      });
    expect((await del(correlation++)).errorCode).toBe(E.GROUP_ID_NOT_FOUND);
    await commit(client, 8, {
      group,
      topic,
      partitions: [
        { partition: 0, offset: 3n },
        { partition: 1, offset: 4n },
        { partition: 2, offset: 5n },
      ],
    });
    const r = await del(correlation++);
    expect(r.errorCode).toBe(0);
    expect(r.topics[0]!.partitions.map((p) => p.errorCode)).toEqual([0, 0]);
    expect((await store.fetch(group, null)).map((o) => o.partition)).toEqual([2]);
  });

  test('DeleteGroups at the broker removes the group from the store', async () => {
    const group = uniqueName('delgroup');
    await commit(client, 8, { group, topic, partitions: [{ partition: 0, offset: 11n }] });
    const admin = new Kafka({ brokers: [proxy.bootstrap], logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    try {
      await admin.deleteGroups([group]);
    } finally {
      await admin.disconnect();
    }
    expect(await store.fetch(group, null)).toEqual([]);
  });
});

describe('proxy options', () => {
  const brokerBootstrap = inject('kafkaBootstrap');
  let dir: string;
  let store: EmbeddedStore;

  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'kop-options-'));
    store = new EmbeddedStore({ dataDir: dir });
  });
  afterAll(async () => {
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('--commit-guard cas: "set the offset to x iff it is y", all or nothing', async () => {
    const proxy = await startOffsetProxy(brokerBootstrap, store, ['--commit-guard', 'cas']);
    const client = await RawClient.connect(proxy.bootstrap);
    try {
      const group = uniqueName('cas');
      // A topic the cluster has: commits to others are refused as a broker refuses them.
      const topic = uniqueName('cas-topic');
      await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 2, replicationFactor: 1 }]);
      expect(
        await commit(client, 8, {
          group,
          topic,
          partitions: [{ partition: 0, offset: 10n, metadata: 'cas:-1;first' }],
        }),
      ).toEqual([E.NONE]);
      expect((await store.fetch(group, null))[0]).toMatchObject({ offset: 10n, metadata: 'first' });
      // Expected -1 again: the offset is 10 now, so nothing changes.
      expect(
        await commit(client, 8, {
          group,
          topic,
          partitions: [{ partition: 0, offset: 20n, metadata: 'cas:-1' }],
        }),
      ).toEqual([E.CAS_MISMATCH]);
      // One matching and one stale partition: neither is written.
      expect(
        await commit(client, 8, {
          group,
          topic,
          partitions: [
            { partition: 0, offset: 30n, metadata: 'cas:10' },
            { partition: 1, offset: 30n, metadata: 'cas:5' },
          ],
        }),
      ).toEqual([E.CAS_MISMATCH, E.CAS_MISMATCH]);
      expect((await store.fetch(group, null)).map((o) => [o.partition, o.offset])).toEqual([[0, 10n]]);
      expect(
        await commit(client, 8, {
          group,
          topic,
          partitions: [{ partition: 0, offset: 30n, metadata: 'cas:10;second' }],
        }),
      ).toEqual([E.NONE]);
      expect((await store.fetch(group, null))[0]).toMatchObject({ offset: 30n, metadata: 'second' });
      // Without the cas: form the commit is unconditional.
      expect(
        await commit(client, 8, {
          group,
          topic,
          partitions: [{ partition: 0, offset: 5n, metadata: 'plain' }],
        }),
      ).toEqual([E.NONE]);
      expect((await store.fetch(group, null))[0]).toMatchObject({ offset: 5n, metadata: 'plain' });
    } finally {
      client.close();
      await proxy.stop();
    }
  });

  test('unknown topics: refused by default as a broker refuses them; allow stores them (mirroring), also per group', async () => {
    const topic = uniqueName('exists');
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 2, replicationFactor: 1 }]);
    const byDefault = await startOffsetProxy(brokerBootstrap, store);
    const allowing = await startOffsetProxy(brokerBootstrap, store, ['--unknown-topics', 'allow']);
    const perGroup = await startOffsetProxy(brokerBootstrap, store, [
      '--unknown-topics-group',
      'mirror-*=allow',
    ]);
    const r = await RawClient.connect(byDefault.bootstrap);
    const a = await RawClient.connect(allowing.bootstrap);
    const p = await RawClient.connect(perGroup.bootstrap);
    try {
      const group = uniqueName('plain');
      const missing = 'no-such-topic-' + group;
      const twoPartitions = {
        topic,
        partitions: [
          { partition: 0, offset: 1n },
          { partition: 5, offset: 1n },
        ],
      };
      const viaProxy = {
        ...(await commitByPartition(r, 8, {
          group,
          topic: missing,
          partitions: [{ partition: 0, offset: 1n }],
        })),
        ...(await commitByPartition(r, 8, { group, ...twoPartitions })),
      };
      expect(viaProxy).toEqual({
        [`${missing}/0`]: E.UNKNOWN_TOPIC_OR_PARTITION,
        [`${topic}/0`]: E.NONE,
        [`${topic}/5`]: E.UNKNOWN_TOPIC_OR_PARTITION,
      });
      // The broker answers the same for the same commits.
      const direct = await RawClient.connect(brokerBootstrap);
      try {
        const other = uniqueName('direct');
        expect({
          ...(await commitByPartition(direct, 8, {
            group: other,
            topic: missing,
            partitions: [{ partition: 0, offset: 1n }],
          })),
          ...(await commitByPartition(direct, 8, { group: other, ...twoPartitions })),
        }).toEqual(viaProxy);
      } finally {
        direct.close();
      }
      const mirror = uniqueName('mirror');
      expect(
        await commit(a, 8, {
          group: mirror,
          topic: 'other-cluster-topic',
          partitions: [{ partition: 9, offset: 77n }],
        }),
      ).toEqual([E.NONE]);
      expect((await store.fetch(group, null)).map((o) => `${o.topic}/${o.partition}=${o.offset}`)).toEqual([
        `${topic}/0=1`,
      ]);
      expect((await store.fetch(mirror, null)).map((o) => `${o.topic}/${o.partition}=${o.offset}`)).toEqual([
        'other-cluster-topic/9=77',
      ]);
      // --unknown-topics-group: allow for the mirror-* groups, the default (reject) for the rest.
      expect(
        await commit(p, 8, {
          group: `mirror-${group}`,
          topic: 'elsewhere',
          partitions: [{ partition: 0, offset: 3n }],
        }),
      ).toEqual([E.NONE]);
      expect(
        await commit(p, 8, {
          group: `other-${group}`,
          topic: 'elsewhere',
          partitions: [{ partition: 0, offset: 3n }],
        }),
      ).toEqual([E.UNKNOWN_TOPIC_OR_PARTITION]);
    } finally {
      r.close();
      a.close();
      p.close();
      await byDefault.stop();
      await allowing.stop();
      await perGroup.stop();
    }
  });
});
