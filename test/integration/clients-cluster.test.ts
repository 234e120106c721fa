// Baseline against a 3-broker 4.4.0 cluster (replication factor 3, group and transaction
// coordinators spread over the brokers): kafkajs, the Java client (both group protocols), kcat and
// python confluent-kafka.

import { afterAll, beforeAll, describe, expect, test } from 'vitest';

import { javaClient, type JavaClient } from '../bed/clients/java.js';
import { kafkajsClient } from '../bed/clients/kafkajs.js';
import { kcatClient } from '../bed/clients/kcat.js';
import { pythonClient } from '../bed/clients/python.js';
import { commitStopResume, produceAndConsume, type ScenarioOptions } from '../bed/clients/scenarios.js';
import type { ClientTarget } from '../bed/clients/types.js';
import { KAFKA_VERSION, startKafka, type KafkaCluster } from '../bed/kafka.js';

describe.concurrent(`3-broker Kafka ${KAFKA_VERSION} cluster`, () => {
  let cluster: KafkaCluster;
  let target: ClientTarget;
  let classic: JavaClient;
  let consumer: JavaClient;
  const opts: ScenarioOptions = { replicationFactor: 3 };

  beforeAll(async () => {
    cluster = await startKafka({ brokers: 3 });
    target = { bootstrap: cluster.bootstrap };
    classic = await javaClient(cluster.classpath, { protocol: 'classic' });
    consumer = await javaClient(cluster.classpath, { protocol: 'consumer' });
  });

  afterAll(async () => {
    await cluster?.stop();
  });

  test('the Java admin client sees all three brokers', async () => {
    const described = await classic.describeCluster(target);
    expect(described.nodes.map((n) => n.id).sort()).toEqual(cluster.brokers.map((b) => b.nodeId).sort());
  });

  test('kafkajs: produce and consume 1,000 records', async () => {
    await produceAndConsume(kafkajsClient, target, opts);
  });

  test('kafkajs: commit, stop, resume', async () => {
    await commitStopResume(kafkajsClient, target, opts);
  });

  test('Java classic: produce and consume 1,000 records', async () => {
    await produceAndConsume(classic, target, opts);
  });

  test('Java classic: commit, stop, resume', async () => {
    await commitStopResume(classic, target, opts);
  });

  test('Java consumer protocol: produce and consume 1,000 records', async () => {
    await produceAndConsume(consumer, target, opts);
  });

  test('Java consumer protocol: commit, stop, resume', async () => {
    await commitStopResume(consumer, target, opts);
  });

  test('kcat: commit, stop, resume', async () => {
    await commitStopResume(kcatClient, target, opts);
  });

  test('python: commit, stop, resume', async () => {
    await commitStopResume(pythonClient, target, opts);
  });
});
