// Baseline: the official Java client (classic and KIP-848 `consumer` group protocols) against the
// bed's single broker (no proxy in between).

import { beforeAll, describe, expect, inject, test } from 'vitest';

import { createTopics } from '../bed/clients/kafkajs.js';
import { javaClient, type JavaClient } from '../bed/clients/java.js';
import {
  commitStopResume,
  expectExactlyRecords,
  produceAndConsume,
  uniqueName,
} from '../bed/clients/scenarios.js';

describe.concurrent('Java client against the broker', () => {
  const target = { bootstrap: inject('kafkaBootstrap') };
  let classic: JavaClient;
  let consumer: JavaClient;

  beforeAll(async () => {
    classic = await javaClient(inject('kafkaClasspath'), { protocol: 'classic' });
    consumer = await javaClient(inject('kafkaClasspath'), { protocol: 'consumer' });
  });

  test('classic protocol: produces and consumes 1,000 records in a group', async () => {
    await produceAndConsume(classic, target);
  });

  test('classic protocol: commit, stop, resume exactly where it left off', async () => {
    await commitStopResume(classic, target);
  });

  test('consumer protocol (KIP-848): produces and consumes 1,000 records in a group', async () => {
    await produceAndConsume(consumer, target);
  });

  test('consumer protocol (KIP-848): commit, stop, resume exactly where it left off', async () => {
    await commitStopResume(consumer, target);
  });

  test('async and auto commit modes also resume without loss or repetition', async () => {
    const topic = uniqueName('java-commit-modes');
    const group = `${topic}-group`;
    await createTopics(target, [{ topic, partitions: 3 }]);
    await classic.produce(target, { topic, count: 300 });
    const a = await classic.consume(target, { topic, group, max: 100, commit: 'async' });
    const b = await consumer.consume(target, { topic, group, max: 100, commit: 'auto' });
    const c = await classic.consume(target, { topic, group, max: 100, commit: 'sync' });
    expectExactlyRecords([...a.records, ...b.records, ...c.records], 0, 300);
    expect(c.committed.reduce((sum, o) => sum + o.offset, 0)).toBe(300);
  });

  for (const protocol of ['classic', 'consumer'] as const) {
    test(`${protocol} protocol: transactional read-process-write commits offsets with the transaction; aborted work is invisible`, async () => {
      const client = protocol === 'classic' ? classic : consumer;
      const input = uniqueName(`java-eos-${protocol}`);
      const output = `${input}-out`;
      await createTopics(target, [
        { topic: input, partitions: 2 },
        { topic: output, partitions: 2 },
      ]);
      await client.produce(target, { topic: input, count: 200, transactionalId: `${input}-producer` });
      const result = await client.transform(target, {
        input,
        output,
        group: `${input}-group`,
        transactionalId: `${input}-transform`,
        max: 200,
        abortFirst: true,
      });
      expect(result.timedOut).toBe(false);
      expect(result.aborted).toBe(1);
      // Offsets of the input, committed inside the transactions: one past each partition's last record.
      expect(result.committed.reduce((sum, o) => sum + o.offset, 0)).toBe(200);
      const read = await client.consume(target, {
        topic: output,
        group: `${output}-reader`,
        max: 200,
        isolation: 'read_committed',
      });
      expect(read.timedOut).toBe(false);
      // Each input record transformed exactly once, although the first batch was processed twice.
      expect(read.records.every((r) => r.value?.startsWith('VALUE-'))).toBe(true);
      expectExactlyRecords(
        read.records.map((r) => ({ ...r, value: r.value?.toLowerCase() ?? null })),
        0,
        200,
      );
    });
  }

  test('admin: describe cluster and the group offsets of a consumer', async () => {
    const cluster = await classic.describeCluster(target);
    expect(cluster.nodes.map((n) => `${n.host}:${n.port}`)).toEqual([target.bootstrap]);
    const topic = uniqueName('java-admin');
    expect(await classic.createTopic(target, topic, 2)).toBe(true);
    expect(await classic.createTopic(target, topic, 2)).toBe(false);
    await classic.produce(target, { topic, count: 50 });
    const consumed = await classic.consume(target, { topic, group: `${topic}-g`, max: 50 });
    expect(await classic.groupOffsets(target, `${topic}-g`)).toEqual(consumed.committed);
  });
});
