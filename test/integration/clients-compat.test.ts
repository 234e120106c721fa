// Baseline against a single Kafka 3.9 broker (the newest 3.9.x, the last line with ZooKeeper-era
// clients in the field): kafkajs, the Java client in versions 3.9 and 4.4 (classic protocol: 3.9
// brokers do not offer KIP-848 to clients), and the 3.9 tools, whose main classes and options
// differ from 4.x.

import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';

import { javaClient, type JavaClient } from '../bed/clients/java.js';
import {
  consumerPerformance,
  describeConsumerGroup,
  kafkaMajorVersion,
  producerPerformance,
} from '../bed/clients/kafka-tools.js';
import { createTopics, kafkajsClient } from '../bed/clients/kafkajs.js';
import { kcatClient } from '../bed/clients/kcat.js';
import { commitStopResume, produceAndConsume, uniqueName } from '../bed/clients/scenarios.js';
import type { ClientTarget } from '../bed/clients/types.js';
import { KAFKA_COMPAT_VERSION, startKafka, type KafkaCluster } from '../bed/kafka.js';

describe.concurrent(`single Kafka ${KAFKA_COMPAT_VERSION} broker`, () => {
  let cluster: KafkaCluster;
  let target: ClientTarget;
  let java39: JavaClient;
  let java4: JavaClient;

  beforeAll(async () => {
    cluster = await startKafka({ version: KAFKA_COMPAT_VERSION });
    target = { bootstrap: cluster.bootstrap };
    java39 = await javaClient(cluster.classpath, { name: 'java-3.9' });
    java4 = await javaClient(inject('kafkaClasspath'), { name: 'java-4' });
  });

  afterAll(async () => {
    await cluster?.stop();
  });

  test('kafkajs: produce and consume 1,000 records', async () => {
    await produceAndConsume(kafkajsClient, target);
  });

  test('kafkajs: commit, stop, resume', async () => {
    await commitStopResume(kafkajsClient, target);
  });

  test('Java 3.9 client: produce and consume 1,000 records', async () => {
    await produceAndConsume(java39, target);
  });

  test('Java 3.9 client: commit, stop, resume (resumed by the 4.x client)', async () => {
    await commitStopResume(java39, target, { resumeWith: java4 });
  });

  test('Java 4.x client: commit, stop, resume', async () => {
    await commitStopResume(java4, target);
  });

  test('kcat: commit, stop, resume', async () => {
    await commitStopResume(kcatClient, target);
  });

  test('3.9 tools: ConsumerGroupCommand --describe and the perf tools', async () => {
    expect(kafkaMajorVersion(cluster.classpath)).toBe(3);
    const topic = uniqueName('compat-tools');
    await createTopics(target, [{ topic, partitions: 2 }]);
    const produced = await producerPerformance(cluster.classpath, target, { topic, numRecords: 1000 });
    expect(produced.records).toBe(1000);
    const consumed = await consumerPerformance(cluster.classpath, target, {
      topic,
      numRecords: 1000,
      group: `${topic}-perf`,
    });
    expect(consumed.records).toBe(1000);
    const group = `${topic}-group`;
    const result = await java39.consume(target, { topic, group, max: 400 });
    const described = await describeConsumerGroup(cluster.classpath, target, group);
    expect(described.map((r) => [r.partition, r.currentOffset])).toEqual(
      result.committed.map((c) => [c.partition, c.offset]),
    );
  });
});
