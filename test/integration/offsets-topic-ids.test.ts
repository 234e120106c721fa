// OffsetCommit and OffsetFetch v10 (KIP-848: topics named by id), sent by a raw client once to the
// broker itself and once through the proxy (embedded store), must get the same answers: error
// codes and offsets, for topic ids the cluster knows, ids it never had, a deleted topic and a
// topic deleted and re-created under its name (old id and new id). Offsets committed in v10 are
// in the store by name, read by v9; a Java 4.4 KIP-848 consumer through the proxy commits in v10.
// On a Kafka 3.9 broker (no v10) the proxy offers v9, as the broker. On both, after a re-creation,
// every reader of the store (CLI, admin API, lag, cas: commits) answers as the broker.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { EmbeddedStore } from '../../backends/embedded-store.js';
import { RedisStore } from '../../backends/redis-store.js';
import { ApiKey } from '../../protocol/messages/index.js';
import type { AnyRequest } from '../../protocol/messages/index.js';
import type { ApiVersionsResponse } from '../../protocol/messages/api-versions-response.js';
import type { CreateTopicsResponse } from '../../protocol/messages/create-topics-response.js';
import type { DeleteTopicsResponse } from '../../protocol/messages/delete-topics-response.js';
import type { OffsetCommitResponse } from '../../protocol/messages/offset-commit-response.js';
import { defaultOffsetFetchRequest } from '../../protocol/messages/offset-fetch-request.js';
import type { OffsetFetchResponse } from '../../protocol/messages/offset-fetch-response.js';
import type { RequestInfo } from '../../proxy/core/extension.js';
import { createTopics } from '../bed/clients/kafkajs.js';
import { javaClient } from '../bed/clients/java.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { KAFKA_COMPAT_VERSION, kafkaClasspath, startKafka, type KafkaCluster } from '../bed/kafka.js';
import { startRedis, type RedisServer } from '../bed/redis.js';
import { INCARNATION_CLOCK_MARGIN_MS } from '../../proxy/offsets/topic-incarnations.js';
import { Conn, topicIds } from '../harness/group-members.js';
import { startOffsetProxy } from '../harness/offset-proxy.js';
import { recreatedTopicEverywhere } from '../harness/recreated-topic.js';
import type { OffsetProxy } from '../harness/offset-proxy.js';

const UNKNOWN_TOPIC_ID = 100;
/** An id no cluster has (a random one, fixed: the test must not depend on luck). */
const NEVER = 'qgYWxu0pQYKKuO1IR1ku6w';

type Topics = [id: string, partitions: number[]][];

const commitV10 = (group: string, topics: Topics, offset: bigint, epoch = -1) => ({
  groupId: group,
  generationIdOrMemberEpoch: epoch,
  memberId: epoch < 0 ? '' : 'no-such-member',
  groupInstanceId: null,
  retentionTimeMs: -1n,
  topics: topics.map(([topicId, parts]) => ({
    name: '',
    topicId,
    partitions: parts.map((partitionIndex) => ({
      partitionIndex,
      committedOffset: offset + BigInt(partitionIndex),
      committedLeaderEpoch: -1,
      committedMetadata: `m${partitionIndex}`,
    })),
  })),
});

/** Each partition's code by `id/partition` (the broker orders the topics of its answer as it likes). */
async function commit(conn: Conn, group: string, topics: Topics, offset: bigint, epoch = -1) {
  const r = await conn.request<OffsetCommitResponse>(
    ApiKey.OffsetCommit,
    10,
    commitV10(group, topics, offset, epoch),
  );
  return r.topics
    .flatMap((t) => t.partitions.map((p) => `${t.topicId}/${p.partitionIndex}=${p.errorCode}`))
    .sort();
}

/**
 * The group's code and each partition's offset, epoch, metadata and code, sorted by
 * `topic/partition`: in v10 topics are asked for and named by id, in v9 by name.
 */
async function fetchIn(
  version: 9 | 10,
  conn: Conn,
  group: string,
  topics: [topic: string, partitions: number[]][] | null,
) {
  const r = await conn.request<OffsetFetchResponse>(ApiKey.OffsetFetch, version, {
    ...defaultOffsetFetchRequest(),
    groups: [
      {
        groupId: group,
        memberId: null,
        memberEpoch: -1,
        topics:
          topics?.map(([topic, partitionIndexes]) =>
            version === 10
              ? { name: '', topicId: topic, partitionIndexes }
              : { name: topic, partitionIndexes },
          ) ?? null,
      },
    ],
    requireStable: true,
  });
  const g = r.groups[0]!;
  return {
    errorCode: g.errorCode,
    partitions: g.topics
      .flatMap((t) =>
        t.partitions.map(
          (p) =>
            `${version === 10 ? t.topicId : t.name}/${p.partitionIndex}=${p.committedOffset}:${p.committedLeaderEpoch}:${p.metadata}:${p.errorCode}`,
        ),
      )
      .sort(),
  };
}

const fetchV10 = (conn: Conn, group: string, topics: Topics | null) => fetchIn(10, conn, group, topics);
const fetchV9 = (conn: Conn, group: string, topics: [name: string, partitions: number[]][] | null) =>
  fetchIn(9, conn, group, topics);

async function deleteTopic(conn: Conn, name: string): Promise<void> {
  const r = await conn.request<DeleteTopicsResponse>(ApiKey.DeleteTopics, 6, {
    topics: [{ name, topicId: 'AAAAAAAAAAAAAAAAAAAAAA' }],
    topicNames: [],
    timeoutMs: 30_000,
  });
  expect(r.responses[0]!.errorCode).toBe(0);
}

/** Creates `name` again once its deletion is complete; resolves with the new id. */
async function recreateTopic(conn: Conn, name: string): Promise<string> {
  for (let i = 0; i < 120; i++) {
    const r = await conn.request<CreateTopicsResponse>(ApiKey.CreateTopics, 7, {
      topics: [{ name, numPartitions: 2, replicationFactor: 1, assignments: [], configs: [] }],
      timeoutMs: 30_000,
      validateOnly: false,
    });
    const t = r.topics[0]!;
    if (t.errorCode === 0) return t.topicId;
    if (t.errorCode !== 36) throw new Error(`CreateTopics: error ${t.errorCode}`); // 36: TOPIC_ALREADY_EXISTS
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`${name} was not deleted in time`);
}

/** Resolves once the broker holds no offset of `group` for the (re-created) topic `id`. */
async function brokerForgot(conn: Conn, group: string, id: string): Promise<void> {
  await expect
    .poll(async () => (await fetchV10(conn, group, [[id, [0, 1]]])).partitions, { timeout: 30_000 })
    .toEqual([`${id}/0=-1:-1::0`, `${id}/1=-1:-1::0`]);
}

async function offsetVersions(conn: Conn): Promise<number[]> {
  const r = await conn.request<ApiVersionsResponse>(ApiKey.ApiVersions, 3, {
    clientSoftwareName: 'kop-test',
    clientSoftwareVersion: '0',
  });
  return [ApiKey.OffsetCommit, ApiKey.OffsetFetch].map(
    (k) => r.apiKeys.find((a) => a.apiKey === k)?.maxVersion ?? -1,
  );
}

describe('OffsetCommit and OffsetFetch v10 (topic ids): through the proxy as directly', () => {
  const broker = inject('kafkaBootstrap');
  let dir: string;
  let store: EmbeddedStore;
  let proxy: OffsetProxy;
  let direct: Conn;
  let via: Conn;
  let topic: string;
  let id: string;
  let brokerHasV10 = false;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'kop-topic-ids-'));
    store = new EmbeddedStore({ dataDir: dir });
    proxy = await startOffsetProxy(broker, store);
    direct = await Conn.open(broker);
    via = await Conn.open(proxy.bootstrap);
    topic = uniqueName('ids');
    await createTopics({ bootstrap: broker }, [{ topic, partitions: 3, replicationFactor: 1 }]);
    id = (await topicIds(direct, [topic])).get(topic)!;
    brokerHasV10 = (await offsetVersions(direct))[0]! >= 10;
  });
  afterAll(async () => {
    direct?.close();
    via?.close();
    await proxy?.stop();
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('the proxy offers OffsetCommit and OffsetFetch up to the versions the broker offers', async () => {
    expect(await offsetVersions(via)).toEqual(await offsetVersions(direct));
  });

  test('known and unknown topic ids: the same codes and offsets; v10 offsets are stored by name', async (ctx) => {
    if (!brokerHasV10) ctx.skip();
    const group = uniqueName('ids-known');
    const topics: Topics = [
      [NEVER, [0, 1]],
      [id, [0, 1]],
    ];
    const answer = await commit(direct, group, topics, 100n);
    expect(answer).toContain(`${NEVER}/0=${UNKNOWN_TOPIC_ID}`);
    expect(answer).toContain(`${id}/1=0`);
    expect(await commit(via, group, topics, 100n)).toEqual(answer);

    const asked: Topics = [
      [id, [0, 1, 2]],
      [NEVER, [0]],
    ];
    const fetched = await fetchV10(direct, group, asked);
    expect(fetched.partitions).toContain(`${id}/1=101:-1:m1:0`);
    expect(await fetchV10(via, group, asked)).toEqual(fetched);
    expect(await fetchV10(via, group, null)).toEqual(await fetchV10(direct, group, null));

    // By name in the store: v9 and the store itself read what v10 wrote.
    const stored = await store.fetch(group, null);
    expect(stored.map((o) => `${o.topic}/${o.partition}=${o.offset}`).sort()).toEqual([
      `${topic}/0=100`,
      `${topic}/1=101`,
    ]);
    const v9 = await via.request<OffsetFetchResponse>(ApiKey.OffsetFetch, 9, {
      ...defaultOffsetFetchRequest(),
      groups: [
        { groupId: group, memberId: null, memberEpoch: -1, topics: [{ name: topic, partitionIndexes: [1] }] },
      ],
    });
    expect(v9.groups[0]!.topics[0]!.partitions[0]!.committedOffset).toBe(101n);
  });

  test('only unknown ids, with a member epoch of a group that does not exist: UNKNOWN_TOPIC_ID, as the broker', async (ctx) => {
    if (!brokerHasV10) ctx.skip();
    const group = uniqueName('ids-unknown');
    const answer = await commit(direct, group, [[NEVER, [0, 1]]], 5n, 3);
    expect(answer).toEqual([`${NEVER}/0=${UNKNOWN_TOPIC_ID}`, `${NEVER}/1=${UNKNOWN_TOPIC_ID}`]);
    expect(await commit(via, group, [[NEVER, [0, 1]]], 5n, 3)).toEqual(answer);
    // With a known id too, the group is checked: GROUP_ID_NOT_FOUND on it.
    const mixed: Topics = [
      [NEVER, [0]],
      [id, [0]],
    ];
    expect(await commit(via, group, mixed, 5n, 3)).toEqual(await commit(direct, group, mixed, 5n, 3));
  });

  test('all topics of a group: the ids of its topics; a deleted topic is left out, as the broker leaves it', async (ctx) => {
    if (!brokerHasV10) ctx.skip();
    const group = uniqueName('ids-all');
    const doomed = uniqueName('ids-doomed');
    await createTopics({ bootstrap: broker }, [{ topic: doomed, partitions: 2, replicationFactor: 1 }]);
    const doomedId = (await topicIds(direct, [doomed])).get(doomed)!;
    const topics: Topics = [
      [id, [0]],
      [doomedId, [0, 1]],
    ];
    expect(await commit(via, group, topics, 7n)).toEqual(await commit(direct, group, topics, 7n));
    expect(await fetchV10(via, group, null)).toEqual(await fetchV10(direct, group, null));
    await deleteTopic(direct, doomed);
    // The broker drops the deleted topic's offsets; the proxy keeps them by name (v9 still shows
    // them) but has no id to name them by once its cache no longer lists the topic (within 5 s).
    await expect
      .poll(async () => (await fetchV10(direct, group, null)).partitions, { timeout: 30_000 })
      .toEqual([`${id}/0=7:-1:m0:0`]);
    await expect
      .poll(async () => fetchV10(via, group, null), { timeout: 30_000, interval: 500 })
      .toEqual(await fetchV10(direct, group, null));
  });

  test('a topic deleted and re-created under its name: the old id is unknown, the new one works, as at the broker', async (ctx) => {
    if (!brokerHasV10) ctx.skip();
    const name = uniqueName('ids-again');
    const group = uniqueName('ids-again-g');
    await createTopics({ bootstrap: broker }, [{ topic: name, partitions: 2, replicationFactor: 1 }]);
    const first = (await topicIds(direct, [name])).get(name)!;
    expect(await commit(via, group, [[first, [0, 1]]], 10n)).toEqual(
      await commit(direct, group, [[first, [0, 1]]], 10n),
    );

    await deleteTopic(direct, name);
    const second = await recreateTopic(direct, name);
    expect(second).not.toBe(first);
    // The broker deletes a deleted topic's offsets a moment after it is re-created, maybe after a
    // commit to the new one. Both sides are compared once the broker is done, on partitions
    // committed since (the old offsets are compared in the test below).
    await brokerForgot(direct, group, second);
    // The new id first (the proxy's cache lacks it: it asks the cluster), then the old one.
    const withNew = await commit(direct, group, [[second, [0, 1]]], 20n);
    expect(withNew).toEqual([`${second}/0=0`, `${second}/1=0`]);
    expect(await commit(via, group, [[second, [0, 1]]], 20n)).toEqual(withNew);
    const withOld = await commit(direct, group, [[first, [0]]], 30n);
    expect(withOld).toEqual([`${first}/0=${UNKNOWN_TOPIC_ID}`]);
    expect(await commit(via, group, [[first, [0]]], 30n)).toEqual(withOld);
    for (const asked of [[[second, [0, 1]]], [[first, [0, 1]]]] as Topics[]) {
      expect(await fetchV10(via, group, asked)).toEqual(await fetchV10(direct, group, asked));
    }

    // Again, the old id first: once the proxy's cache is older than its age (5 s) it is refreshed
    // before it answers, so the old id is unknown there too.
    await deleteTopic(direct, name);
    const third = await recreateTopic(direct, name);
    await brokerForgot(direct, group, third);
    await new Promise((resolve) => setTimeout(resolve, 5_500));
    const stale = await commit(direct, group, [[second, [0]]], 40n);
    expect(stale).toEqual([`${second}/0=${UNKNOWN_TOPIC_ID}`]);
    expect(await commit(via, group, [[second, [0]]], 40n)).toEqual(stale);
    expect(await commit(via, group, [[third, [1]]], 50n)).toEqual(
      await commit(direct, group, [[third, [1]]], 50n),
    );
    expect(await fetchV10(via, group, [[third, [1]]])).toEqual(await fetchV10(direct, group, [[third, [1]]]));
  });

  test('a Java 4.4 KIP-848 consumer through the proxy commits in v10; its offsets are in the store by name', async (ctx) => {
    if (!brokerHasV10) ctx.skip();
    const service = proxy.offsets.service;
    const seen = new Set<string>();
    const handle = service.handleRequest.bind(service);
    service.handleRequest = (info: RequestInfo, request: AnyRequest) => {
      seen.add(`${info.apiKey}v${info.apiVersion}`);
      return handle(info, request);
    };
    const java = await javaClient(inject('kafkaClasspath'), { protocol: 'consumer' });
    const target = { bootstrap: proxy.bootstrap };
    const input = uniqueName('ids-java');
    const group = `${input}-group`;
    await createTopics({ bootstrap: broker }, [{ topic: input, partitions: 2, replicationFactor: 1 }]);
    await java.produce(target, { topic: input, count: 100 });
    const run = await java.consume(target, { topic: input, group, max: 100, commit: 'sync' });
    expect(run.records).toHaveLength(100);
    expect(seen).toContain(`${ApiKey.OffsetCommit}v10`);
    expect([...seen].filter((s) => s.startsWith(`${ApiKey.OffsetCommit}v`))).toEqual([
      `${ApiKey.OffsetCommit}v10`,
    ]);
    const stored = await store.fetch(group, null);
    expect(stored.every((o) => o.topic === input)).toBe(true);
    expect(stored.reduce((sum, o) => sum + Number(o.offset), 0)).toBe(100);
  });
});

describe('a topic deleted and re-created: its old offsets are gone through the proxy as at the broker', () => {
  const broker = inject('kafkaBootstrap');
  let redis: RedisServer;
  const stores: RedisStore[] = [];
  const proxies: OffsetProxy[] = [];
  const conns: Conn[] = [];
  let direct: Conn;

  /** A proxy instance on the shared Redis, and a connection through it. */
  async function instance(): Promise<{ proxy: OffsetProxy; via: Conn; store: RedisStore }> {
    const store = new RedisStore(redis.url, { operationTimeoutMs: 5_000 });
    stores.push(store);
    const proxy = await startOffsetProxy(broker, store);
    proxies.push(proxy);
    const via = await Conn.open(proxy.bootstrap);
    conns.push(via);
    return { proxy, via, store };
  }

  beforeAll(async () => {
    redis = await startRedis();
    direct = await Conn.open(broker);
  }, 120_000);
  afterAll(async () => {
    direct?.close();
    for (const c of conns) c.close();
    for (const p of proxies) await p.stop();
    for (const s of stores) await s.close().catch(() => undefined);
    await redis?.stop();
  });

  test('two proxies on one Redis and a restarted one answer the old id, the new id, v9 by name and the whole group as the broker', async (ctx) => {
    if ((await offsetVersions(direct))[0]! < 10) ctx.skip();
    const a = await instance();
    const b = await instance();
    const name = uniqueName('ids-reborn');
    const group = uniqueName('ids-reborn-g');
    await createTopics({ bootstrap: broker }, [{ topic: name, partitions: 2, replicationFactor: 1 }]);
    const first = (await topicIds(direct, [name])).get(name)!;
    const old: Topics = [[first, [0, 1]]];
    expect(await commit(a.via, group, old, 10n)).toEqual(await commit(direct, group, old, 10n));
    const committedAt = Date.now();
    expect(await fetchV10(b.via, group, old)).toEqual(await fetchV10(direct, group, old));
    // A proxy hides only what was committed before it last saw the old id (design.md): after a
    // commit it refreshes within 5 s, so the old id is seen after the commit before it is deleted.
    await expect
      .poll(() => a.proxy.offsets.incarnations.incarnationOf(name)?.seen ?? 0, { timeout: 30_000 })
      .toBeGreaterThan(committedAt + INCARNATION_CLOCK_MARGIN_MS);

    await deleteTopic(direct, name);
    const second = await recreateTopic(direct, name);
    await brokerForgot(direct, group, second);
    const fresh: Topics = [[second, [0, 1]]];
    // Proxy a notices the re-creation; b is asked afterwards, and a restarted proxy last.
    expect(await fetchV10(a.via, group, fresh)).toEqual(await fetchV10(direct, group, fresh));
    expect((await fetchV10(direct, group, fresh)).partitions).toEqual([
      `${second}/0=-1:-1::0`,
      `${second}/1=-1:-1::0`,
    ]);
    // One partition committed again, by name (v9), through b.
    const v9commit = async (conn: Conn) =>
      (
        await conn.request<OffsetCommitResponse>(ApiKey.OffsetCommit, 9, {
          ...commitV10(group, [], 0n),
          topics: [
            {
              name,
              topicId: 'AAAAAAAAAAAAAAAAAAAAAA',
              partitions: [
                {
                  partitionIndex: 1,
                  committedOffset: 20n,
                  committedLeaderEpoch: -1,
                  committedMetadata: 'new',
                },
              ],
            },
          ],
        })
      ).topics.flatMap((t) => t.partitions.map((p) => p.errorCode));
    expect(await v9commit(direct)).toEqual([0]);
    expect(await v9commit(b.via)).toEqual([0]);

    const compareThrough = async (via: Conn) => {
      for (const asked of [fresh, old, null]) {
        expect(await fetchV10(via, group, asked)).toEqual(await fetchV10(direct, group, asked));
      }
      for (const asked of [[[name, [0, 1]]], null] as [string, number[]][][]) {
        expect(await fetchV9(via, group, asked)).toEqual(await fetchV9(direct, group, asked));
      }
    };
    await compareThrough(b.via);
    await compareThrough(a.via);
    expect((await fetchV9(direct, group, null)).partitions).toEqual([`${name}/1=20:-1:new:0`]);

    // A proxy started afterwards on the same store (a restart) reads the record.
    await b.proxy.stop();
    const c = await instance();
    await compareThrough(c.via);
    expect(c.proxy.offsets.incarnations.incarnationOf(name)).toMatchObject({ id: second });
    // The old offsets are still in the store, under the name: hidden, not deleted.
    expect(
      (await c.store.fetch(group, null)).map((o) => `${o.topic}/${o.partition}=${o.offset}`).sort(),
    ).toEqual([`${name}/0=10`, `${name}/1=20`]);
  });
});

describe("a topic deleted and re-created: every reader of the store answers as the bed's broker", () => {
  test('kafka-consumer-groups, OffsetFetch, the offsets CLI, the admin API, lag and cas: commits', async () => {
    await recreatedTopicEverywhere(inject('kafkaBootstrap'), inject('kafkaClasspath'));
  }, 300_000);
});

describe(`OffsetCommit and OffsetFetch on a Kafka ${KAFKA_COMPAT_VERSION} broker (no v10)`, () => {
  let cluster: KafkaCluster;
  let dir: string;
  let store: EmbeddedStore;
  let proxy: OffsetProxy;

  beforeAll(async () => {
    cluster = await startKafka({ version: KAFKA_COMPAT_VERSION });
    dir = mkdtempSync(path.join(os.tmpdir(), 'kop-topic-ids-3-'));
    store = new EmbeddedStore({ dataDir: dir });
    proxy = await startOffsetProxy(cluster.bootstrap, store);
  }, 300_000);
  afterAll(async () => {
    await proxy?.stop();
    await store?.close();
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('the proxy offers v9 as the broker does, so clients negotiate the same versions', async () => {
    const direct = await Conn.open(cluster.bootstrap);
    const via = await Conn.open(proxy.bootstrap);
    try {
      expect(await offsetVersions(direct)).toEqual([9, 9]);
      expect(await offsetVersions(via)).toEqual([9, 9]);
    } finally {
      direct.close();
      via.close();
    }
  });

  test('a topic deleted and re-created: every reader of the store answers as the broker', async () => {
    await recreatedTopicEverywhere(cluster.bootstrap, await kafkaClasspath(KAFKA_COMPAT_VERSION));
  }, 300_000);
});
