// Unchanged clients commit and fetch offsets through the proxy: the Java client (classic and the
// KIP-848 consumer protocol), kafkajs, librdkafka (kcat and Python) and Kafka's own tools. The
// offsets live in the proxy's store (read here directly), the broker holds none for the group,
// and a restarted consumer resumes exactly there.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { EmbeddedStore } from '../../backends/embedded-store.js';
import type { BedClient, ClientTarget } from '../bed/clients/types.js';
import { javaClient } from '../bed/clients/java.js';
import type { JavaClient } from '../bed/clients/java.js';
import {
  commitOffsetsInTransaction,
  createTopics,
  fetchCommittedOffsets,
  kafkajsClient,
  setGroupOffsets,
} from '../bed/clients/kafkajs.js';
import { describeConsumerGroup, resetConsumerGroupOffsets } from '../bed/clients/kafka-tools.js';
import { kcatClient } from '../bed/clients/kcat.js';
import { pythonClient } from '../bed/clients/python.js';
import { commitStopResume, expectExactlyRecords, uniqueName } from '../bed/clients/scenarios.js';
import { startOffsetProxy } from '../harness/offset-proxy.js';
import type { OffsetProxy } from '../harness/offset-proxy.js';
import { RawClient } from '../harness/raw-client.js';
import { commitBody, commitOnce } from '../reliability/commit-checker.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import type { OffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';
import type { OffsetCommitResponse } from '../../protocol/messages/offset-commit-response.js';

describe('clients committing through the proxy (embedded store)', () => {
  const brokerBootstrap = inject('kafkaBootstrap');
  const classpath = inject('kafkaClasspath');
  let dir: string;
  let store: EmbeddedStore;
  let proxy: OffsetProxy;
  let target: ClientTarget;
  let classic: JavaClient;
  let kip848: JavaClient;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'kop-clients-'));
    store = new EmbeddedStore({ dataDir: dir });
    proxy = await startOffsetProxy(brokerBootstrap, store);
    target = { bootstrap: proxy.bootstrap };
    classic = await javaClient(classpath, { protocol: 'classic' });
    kip848 = await javaClient(classpath, { protocol: 'consumer' });
  });
  afterAll(async () => {
    await proxy?.stop();
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The group's offsets are in the store (1,010 records consumed in all) and not at the broker. */
  async function expectOffsetsInStoreOnly(group: string, topic: string): Promise<void> {
    const stored = await store.fetch(group, null);
    expect(stored.reduce((sum, o) => sum + Number(o.offset), 0)).toBe(1010);
    const atBroker = await fetchCommittedOffsets({ bootstrap: brokerBootstrap }, group, topic);
    expect(atBroker).toEqual([]);
  }

  const clients: [string, () => BedClient][] = [
    ['Java, classic protocol', () => classic],
    ['Java, consumer protocol (KIP-848)', () => kip848],
    ['kafkajs', () => kafkajsClient],
    ['kcat (librdkafka)', () => kcatClient],
    ['Python confluent-kafka (librdkafka)', () => pythonClient],
  ];
  for (const [name, client] of clients) {
    test(`${name}: commits land in the store and a new consumer resumes exactly there`, async () => {
      const report = await commitStopResume(client(), target, { admin: { bootstrap: brokerBootstrap } });
      await expectOffsetsInStoreOnly(report.group, report.topic);
    });
  }

  test('KIP-848 members are recorded with their epochs from ConsumerGroupHeartbeat', async () => {
    const topic = uniqueName('kip848-state');
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 2 }]);
    await kip848.produce(target, { topic, count: 20 });
    const group = `${topic}-g`;
    const consumed = await kip848.consume(target, { topic, group, max: 20 });
    expectExactlyRecords(consumed.records, 0, 20);
    const state = await store.getGroup(group);
    expect(state?.protocol).toBe('consumer');
  });

  test('a running KIP-848 group is not empty: an admin-style commit (generation -1) is refused', async () => {
    // The broker's DescribeGroups calls a running consumer-protocol group "not found"; the proxy
    // must not take that for empty (it once did, accepting the commit and clearing the members).
    const topic = uniqueName('kip848-running');
    const group = `${topic}-g`;
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 2 }]);
    await kip848.produce(target, { topic, count: 10 });
    // It waits for 20 records: a member of the group until the next 10 come, after the commit.
    const running = kip848.consume(target, { topic, group, max: 20, timeoutMs: 60_000 });
    const deadline = Date.now() + 15_000;
    while (((await store.getGroup(group))?.members.length ?? 0) === 0) {
      if (Date.now() > deadline) throw new Error('the KIP-848 member never appeared in the store');
      await new Promise((r) => setTimeout(r, 100));
    }
    const admin = await RawClient.connect(proxy.bootstrap);
    try {
      expect(await commitOnce(admin, group, topic, 2, 5n)).toEqual([25, 25]); // UNKNOWN_MEMBER_ID
    } finally {
      admin.close();
    }
    expect((await store.getGroup(group))?.members.length).toBeGreaterThan(0);
    await kip848.produce(target, { topic, count: 10, start: 10 });
    const consumed = await running;
    expect(consumed.timedOut).toBe(false);
    expectExactlyRecords(consumed.records, 0, 20);
  });

  test('kafka-consumer-groups --describe and --reset-offsets through the proxy act on the store', async () => {
    const topic = uniqueName('tools');
    const group = `${topic}-g`;
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 2 }]);
    await kafkajsClient.produce(target, { topic, count: 100 });
    const consumed = await kafkajsClient.consume(target, { topic, group, max: 60 });
    expect(consumed.records).toHaveLength(60);

    const rows = await describeConsumerGroup(classpath, target, group);
    const stored = await store.fetch(group, null);
    expect(rows.map((r) => [r.partition, r.currentOffset]).sort()).toEqual(
      stored.map((o) => [o.partition, Number(o.offset)]).sort(),
    );
    expect(rows.reduce((sum, r) => sum + (r.lag ?? 0), 0)).toBe(40);

    const reset = await resetConsumerGroupOffsets(classpath, target, { group, topic, to: 'earliest' });
    expect(reset.map((r) => r.offset)).toEqual([0, 0]);
    const after = await store.fetch(group, null);
    expect(after.map((o) => o.offset)).toEqual([0n, 0n]);
    const again = await kafkajsClient.consume(target, { topic, group, max: 100 });
    expectExactlyRecords(again.records, 0, 100);
  });

  /** Plain commits of `offsets` (partition i at offsets[i]), then a transaction committing 15 on partition 0. */
  async function plainThenTransaction(on: ClientTarget, group: string, topic: string, offsets: number[]) {
    await setGroupOffsets(
      on,
      group,
      topic,
      offsets.map((offset, partition) => ({ partition, offset })),
    );
    await commitOffsetsInTransaction(on, {
      transactionalId: `${group}-tx`,
      group,
      topic,
      offsets: [{ partition: 0, offset: 15 }],
    });
  }

  test('a group moving to transactions keeps its earlier offsets, as on the broker (differential)', async () => {
    const topic = uniqueName('to-eos');
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 3 }]);
    // The same sequence directly and through the proxy: plain commits of three partitions, then
    // a transaction that commits one of them (an application switched to exactly-once).
    const run = async (on: ClientTarget, name: string) => {
      const group = `${topic}-${name}`;
      await plainThenTransaction(on, group, topic, [10, 20, 30]);
      return { group, offsets: await fetchCommittedOffsets(on, group, topic) };
    };
    const direct = await run({ bootstrap: brokerBootstrap }, 'direct');
    const proxied = await run(target, 'proxied');
    expect((await store.getGroup(proxied.group))?.transactional).toBe(true);
    const offsets = (r: { offsets: { partition: number; offset: number }[] }) =>
      r.offsets.map((o) => [o.partition, o.offset]);
    expect(offsets(direct)).toEqual([
      [0, 15],
      [1, 20],
      [2, 30],
    ]);
    expect(offsets(proxied)).toEqual(offsets(direct));
  });

  test("compare-and-set groups moving to transactions: plain commits are the broker's (differential)", async () => {
    const topic = uniqueName('cas-to-eos');
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 2 }]);
    const cas = await startOffsetProxy(brokerBootstrap, store, ['--commit-guard', 'cas']);
    try {
      // Plain commits, a transaction on partition 0, then a plain commit of partition 0 again:
      // the broker keeps the later one, and so must the proxy (it once kept it in the store,
      // hidden behind the broker's transactional offset that OffsetFetch shows).
      const run = async (on: ClientTarget, name: string) => {
        const group = `${topic}-${name}`;
        await plainThenTransaction(on, group, topic, [10, 20]);
        await setGroupOffsets(on, group, topic, [{ partition: 0, offset: 50 }]);
        return { group, offsets: await fetchCommittedOffsets(on, group, topic) };
      };
      const direct = await run({ bootstrap: brokerBootstrap }, 'direct');
      const proxied = await run({ bootstrap: cas.bootstrap }, 'proxied');
      const offsets = (r: { offsets: { partition: number; offset: number }[] }) =>
        r.offsets.map((o) => [o.partition, o.offset]);
      expect(offsets(direct)).toEqual([
        [0, 50],
        [1, 20],
      ]);
      expect(offsets(proxied)).toEqual(offsets(direct));
      // A compare-and-set cannot be kept there (the broker has none): refused, nothing written.
      const raw = await RawClient.connect(cas.bootstrap);
      try {
        const body = commitBody(proxied.group, topic, 1, 60n) as OffsetCommitRequest;
        body.topics[0]!.partitions[0]!.committedMetadata = 'cas:50';
        const res = await raw.request<OffsetCommitResponse>(ApiKey.OffsetCommit, 8, 77, body);
        expect(res.topics[0]!.partitions.map((p) => p.errorCode)).toEqual([ErrorCode.INVALID_TXN_STATE]);
      } finally {
        raw.close();
      }
      expect(offsets({ offsets: await fetchCommittedOffsets(cas, proxied.group, topic) })).toEqual(
        offsets(direct),
      );
    } finally {
      await cas.stop();
    }
  });

  test('exactly-once read-process-write through the proxy: transactional offsets stay with the broker', async () => {
    const input = uniqueName('eos-in');
    const output = `${input}-out`;
    const group = `${input}-group`;
    await createTopics({ bootstrap: brokerBootstrap }, [
      { topic: input, partitions: 2 },
      { topic: output, partitions: 2 },
    ]);
    await classic.produce(target, { topic: input, count: 200, transactionalId: `${input}-producer` });
    const result = await classic.transform(target, {
      input,
      output,
      group,
      transactionalId: `${input}-transform`,
      max: 200,
      abortFirst: true,
    });
    expect(result.timedOut).toBe(false);
    // Read back through the proxy: the group is transactional, so its OffsetFetch is the broker's.
    expect(result.committed.reduce((sum, o) => sum + o.offset, 0)).toBe(200);
    expect((await store.getGroup(group))?.transactional).toBe(true);
    const atBroker = await fetchCommittedOffsets({ bootstrap: brokerBootstrap }, group, input);
    expect(atBroker.reduce((sum, o) => sum + o.offset, 0)).toBe(200);
    const read = await classic.consume(target, {
      topic: output,
      group: `${output}-reader`,
      max: 200,
      isolation: 'read_committed',
    });
    expectExactlyRecords(
      read.records.map((r) => ({ ...r, value: r.value?.toLowerCase() ?? null })),
      0,
      200,
    );
  });
});
