// Kafka's own tools (ConsumerGroupCommand, ProducerPerformance, ConsumerPerformance), run from the
// bed's jars against its single broker, with their output parsed.

import { beforeAll, describe, expect, inject, test } from 'vitest';

import { javaClient, type JavaClient } from '../bed/clients/java.js';
import {
  consumerPerformance,
  describeConsumerGroup,
  producerPerformance,
  resetConsumerGroupOffsets,
} from '../bed/clients/kafka-tools.js';
import { createTopics } from '../bed/clients/kafkajs.js';
import { uniqueName } from '../bed/clients/scenarios.js';

describe.concurrent('Kafka tools against the broker', () => {
  const target = { bootstrap: inject('kafkaBootstrap') };
  const classpath = inject('kafkaClasspath');
  let java: JavaClient;

  beforeAll(async () => {
    java = await javaClient(classpath);
  });

  test('ConsumerGroupCommand --describe shows the committed offsets; --reset-offsets moves them', async () => {
    const topic = uniqueName('tools-cgc');
    const group = `${topic}-group`;
    await createTopics(target, [{ topic, partitions: 3 }]);
    await java.produce(target, { topic, count: 300 });
    const consumed = await java.consume(target, { topic, group, max: 120 });

    // An inactive group is described by its committed offsets: exactly the partitions it committed.
    const described = await describeConsumerGroup(classpath, target, group);
    expect(described.map((r) => [r.topic, r.partition, r.currentOffset])).toEqual(
      consumed.committed.map((c) => [c.topic, c.partition, c.offset]),
    );
    expect(described.reduce((sum, r) => sum + (r.currentOffset ?? 0), 0)).toBe(120);
    for (const row of described) {
      expect(row.group).toBe(group);
      expect(row.consumerId).toBeNull(); // the consumer has left
      expect(row.lag).toBe((row.logEndOffset ?? 0) - (row.currentOffset ?? 0));
    }

    const reset = await resetConsumerGroupOffsets(classpath, target, { group, topic, to: 'earliest' });
    expect(reset.map((r) => [r.partition, r.offset])).toEqual([
      [0, 0],
      [1, 0],
      [2, 0],
    ]);
    expect(await java.groupOffsets(target, group)).toEqual(
      [0, 1, 2].map((partition) => ({ topic, partition, offset: 0 })),
    );
  });

  test('short ProducerPerformance and ConsumerPerformance runs report parsable results', async () => {
    const topic = uniqueName('tools-perf');
    await createTopics(target, [{ topic, partitions: 2 }]);
    const produced = await producerPerformance(classpath, target, {
      topic,
      numRecords: 2000,
      recordSize: 100,
    });
    expect(produced.records).toBe(2000);
    expect(produced.recordsPerSec).toBeGreaterThan(0);
    expect(produced.p99Ms).toBeGreaterThanOrEqual(produced.p50Ms);
    const consumed = await consumerPerformance(classpath, target, {
      topic,
      numRecords: 2000,
      group: `${topic}-g`,
    });
    expect(consumed.records).toBe(2000);
    expect(consumed.mbConsumed).toBeCloseTo((2000 * 100) / (1024 * 1024), 2);
  });
});
