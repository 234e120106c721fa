// A topic deleted and re-created under its name, seen by every reader of the proxy's store next
// to the broker itself: kafka-consumer-groups --describe directly and through the proxy, OffsetFetch
// v9, the offsets CLI (with and without the cluster), the admin HTTP API (reads and compare-and-set),
// the lag gauges on /metrics and a `cas:` commit. The broker deletes a deleted topic's offsets, so
// none of them may show the older topic's offsets (docs/design.md, "A topic deleted and re-created").
import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import { ApiKey } from '../../protocol/messages/index.js';
import type { CreateTopicsResponse } from '../../protocol/messages/create-topics-response.js';
import type { DeleteTopicsResponse } from '../../protocol/messages/delete-topics-response.js';
import type { OffsetCommitResponse } from '../../protocol/messages/offset-commit-response.js';
import { defaultOffsetFetchRequest } from '../../protocol/messages/offset-fetch-request.js';
import type { OffsetFetchResponse } from '../../protocol/messages/offset-fetch-response.js';
import { createTopics } from '../bed/clients/kafkajs.js';
import { describeConsumerGroup } from '../bed/clients/kafka-tools.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { freePort } from '../bed/ports.js';
import { startCli } from './cli-process.js';
import { Conn } from './group-members.js';
import { ensureBuilt, spawnProxy } from './proxy.js';
import { scratchDir, removeScratch } from './scratch.js';

const INVALID_COMMIT_OFFSET_SIZE = 28;
const TOPIC_ALREADY_EXISTS = 36;

/** OffsetCommit v9 by name (every broker the bed runs has it): each partition's code. */
async function commitV9(
  conn: Conn,
  group: string,
  topic: string,
  offsets: [partition: number, offset: bigint, metadata?: string][],
): Promise<number[]> {
  const r = await conn.request<OffsetCommitResponse>(ApiKey.OffsetCommit, 9, {
    groupId: group,
    generationIdOrMemberEpoch: -1,
    memberId: '',
    groupInstanceId: null,
    retentionTimeMs: -1n,
    topics: [
      {
        name: topic,
        topicId: 'AAAAAAAAAAAAAAAAAAAAAA',
        partitions: offsets.map(([partitionIndex, committedOffset, metadata]) => ({
          partitionIndex,
          committedOffset,
          committedLeaderEpoch: -1,
          committedMetadata: metadata ?? '',
        })),
      },
    ],
  });
  return r.topics.flatMap((t) => t.partitions.map((p) => p.errorCode));
}

/** The group's offsets of `topic` (v9, by name): `partition=offset`, -1 where none. */
async function fetchV9(conn: Conn, group: string, topic: string): Promise<string[]> {
  const r = await conn.request<OffsetFetchResponse>(ApiKey.OffsetFetch, 9, {
    ...defaultOffsetFetchRequest(),
    groups: [
      {
        groupId: group,
        memberId: null,
        memberEpoch: -1,
        topics: [{ name: topic, partitionIndexes: [0, 1] }],
      },
    ],
  });
  return r.groups[0]!.topics.flatMap((t) =>
    t.partitions.map((p) => `${p.partitionIndex}=${p.committedOffset}`),
  );
}

async function recreate(conn: Conn, topic: string): Promise<void> {
  const deleted = await conn.request<DeleteTopicsResponse>(ApiKey.DeleteTopics, 6, {
    topics: [{ name: topic, topicId: 'AAAAAAAAAAAAAAAAAAAAAA' }],
    topicNames: [],
    timeoutMs: 30_000,
  });
  expect(deleted.responses[0]!.errorCode).toBe(0);
  // Created again once the deletion is complete.
  await expect
    .poll(
      async () => {
        const r = await conn.request<CreateTopicsResponse>(ApiKey.CreateTopics, 7, {
          topics: [{ name: topic, numPartitions: 2, replicationFactor: 1, assignments: [], configs: [] }],
          timeoutMs: 30_000,
          validateOnly: false,
        });
        return r.topics[0]!.errorCode;
      },
      { timeout: 60_000, interval: 250 },
    )
    .not.toBe(TOPIC_ALREADY_EXISTS);
}

/** `offsets <args>` of the CLI on the proxy's data directory: its JSON lines as `topic-partition=offset`. */
async function cliLines(args: string[]): Promise<string[]> {
  const cli = startCli(['offsets', ...args]);
  expect(await cli.exited, cli.output()).toBe(0);
  return cli
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{"group"'))
    .map((l) => JSON.parse(l) as { topic: string; partition: number; offset: string })
    .map((l) => `${l.topic}-${l.partition}=${l.offset}`);
}

/** Runs the comparison against the broker at `broker`, with Kafka's tools from `classpath`. */
export async function recreatedTopicEverywhere(broker: string, classpath: string): Promise<void> {
  await ensureBuilt();
  const token = randomBytes(18).toString('hex');
  const topic = uniqueName('reborn');
  const group = `${topic}-g`;
  const casGroup = `${topic}-cas`;
  const dataDir = scratchDir('kop-reborn');
  const http = `127.0.0.1:${await freePort()}`;
  const proxy = await spawnProxy([
    '--bootstrap-server',
    broker,
    '--data-dir',
    dataDir,
    '--http',
    http,
    '--http-token',
    token,
    '--lag-interval-ms',
    '500',
    '--lag-groups-include',
    `${topic}*`,
    '--commit-guard-group',
    `${casGroup}=cas`,
  ]);
  const direct = await Conn.open(broker);
  const via = await Conn.open(proxy.bootstrap);
  const call = async (method: string, route: string, body?: unknown) => {
    const res = await fetch(`http://${http}${route}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, text: await res.text() };
  };
  try {
    await createTopics({ bootstrap: broker }, [{ topic, partitions: 2, replicationFactor: 1 }]);
    const first: [number, bigint][] = [
      [0, 10n],
      [1, 11n],
    ];
    expect(await commitV9(direct, group, topic, first)).toEqual([0, 0]);
    expect(await commitV9(via, group, topic, first)).toEqual([0, 0]);
    expect(
      await commitV9(via, casGroup, topic, [
        [0, 5n, 'cas:-1'],
        [1, 6n, 'cas:-1'],
      ]),
    ).toEqual([0, 0]);
    // A proxy hides what was committed before it last saw the old id (docs/design.md): its topic
    // ids are refreshed 5 s after a commit and by a fetch when older than 5 s, so 8 s of fetches
    // have it see the old id after these commits.
    for (let i = 0; i < 8; i++) {
      expect(await fetchV9(via, group, topic)).toEqual(['0=10', '1=11']);
      await new Promise((r) => setTimeout(r, 1_000));
    }

    await recreate(direct, topic);
    // The broker deletes the older topic's offsets a moment after the re-creation.
    await expect.poll(() => fetchV9(direct, group, topic), { timeout: 60_000 }).toEqual(['0=-1', '1=-1']);
    // UNKNOWN_TOPIC_OR_PARTITION until the new topic's metadata has reached the broker (3.9).
    for (const conn of [direct, via])
      await expect.poll(() => commitV9(conn, group, topic, [[1, 20n]]), { timeout: 60_000 }).toEqual([0]);

    // kafka-consumer-groups and OffsetFetch: as the broker answers.
    const described = await describeConsumerGroup(classpath, { bootstrap: broker }, group);
    // Only the partition committed since: the broker deleted the older topic's.
    expect(described.map((r) => [r.partition, r.currentOffset])).toEqual([[1, 20]]);
    await expect
      .poll(() => describeConsumerGroup(classpath, { bootstrap: proxy.bootstrap }, group), {
        timeout: 60_000,
      })
      .toEqual(described);
    expect(await fetchV9(via, group, topic)).toEqual(await fetchV9(direct, group, topic));

    // The offsets CLI, with the cluster and with the proxies' records alone.
    const get = ['get', '--data-dir', dataDir, '--group', group];
    expect(await cliLines([...get, '--bootstrap-server', broker])).toEqual([`${topic}-1=20`]);
    expect(await cliLines(get)).toEqual([`${topic}-1=20`]);
    expect(await cliLines(['export', '--data-dir', dataDir, '--group', group])).toEqual([`${topic}-1=20`]);

    // The admin API: reads, and a compare-and-set against what a read shows.
    const read = await call('GET', `/admin/groups/${group}/offsets`);
    expect(read.status).toBe(200);
    expect(
      (JSON.parse(read.text) as { offsets: { partition: number }[] }).offsets.map((o) => o.partition),
    ).toEqual([1]);
    const setP0 = (expected: string) =>
      call('PUT', `/admin/groups/${casGroup}/offsets/${topic}/0`, { offset: '7', expected });
    expect((await setP0('5')).status).toBe(409);
    expect((await setP0('-1')).status).toBe(200);
    // A client's `cas:` commit: its older offset is none.
    expect(await commitV9(via, casGroup, topic, [[1, 8n, 'cas:6']])).toEqual([INVALID_COMMIT_OFFSET_SIZE]);
    expect(await commitV9(via, casGroup, topic, [[1, 8n, 'cas:-1']])).toEqual([0]);
    expect(await fetchV9(via, casGroup, topic)).toEqual(['0=7', '1=8']);

    // Lag: the older offset is no offset (-1, as the Kafka exporter shows an uncommitted partition).
    const series = async (): Promise<string[]> => {
      const text = (await call('GET', '/metrics')).text;
      return text
        .split('\n')
        .filter((l) => l.startsWith('kafka_consumergroup_current_offset{') && l.includes(`"${group}"`))
        .map((l) => `${/partition="(\d+)"/.exec(l)![1]}=${l.split(' ').at(-1)}`)
        .sort();
    };
    await expect.poll(series, { timeout: 30_000 }).toEqual(['0=-1', '1=20']);
  } finally {
    direct.close();
    via.close();
    await proxy.stop();
    removeScratch(dataDir);
  }
}
