// Every client helper's SASL options against a SASL_PLAINTEXT broker (PLAIN, SCRAM-SHA-256 and
// SCRAM-SHA-512 enabled; the bed's super user), and a wrong password failing as it should.

import { afterAll, beforeAll, describe, expect, test } from 'vitest';

import { javaClient, type JavaClient } from '../bed/clients/java.js';
import { describeConsumerGroup } from '../bed/clients/kafka-tools.js';
import { createTopics, kafkajsClient } from '../bed/clients/kafkajs.js';
import { kcatClient } from '../bed/clients/kcat.js';
import { pythonClient } from '../bed/clients/python.js';
import { commitStopResume, produceAndConsume, uniqueName } from '../bed/clients/scenarios.js';
import type { BedClient, ClientTarget, SaslMechanism } from '../bed/clients/types.js';
import { startKafka, type KafkaCluster } from '../bed/kafka.js';

describe.concurrent('SASL_PLAINTEXT broker', () => {
  let cluster: KafkaCluster;
  let java: JavaClient;
  const as = (mechanism: SaslMechanism): ClientTarget => {
    const admin = cluster.sasl?.users[0];
    if (!admin) throw new Error('the SASL cluster has no users');
    return { bootstrap: cluster.bootstrap, sasl: { mechanism, ...admin } };
  };

  beforeAll(async () => {
    cluster = await startKafka({ sasl: true });
    java = await javaClient(cluster.classpath);
  });

  afterAll(async () => {
    await cluster?.stop();
  });

  // librdkafka before 2.6.1 (kcat 1.7 and python confluent-kafka 1.7 use 2.0.2) fails SCRAM against
  // Kafka 4.x brokers: it repeats the client nonce in its final message, which 4.x rejects
  // (confluentinc/librdkafka#4895). So the librdkafka clients authenticate with PLAIN here.
  const cases: [string, () => BedClient, SaslMechanism][] = [
    ['kafkajs', () => kafkajsClient, 'SCRAM-SHA-256'],
    ['Java', () => java, 'SCRAM-SHA-512'],
    ['kcat', () => kcatClient, 'PLAIN'],
    ['python', () => pythonClient, 'PLAIN'],
  ];
  for (const [name, client, mechanism] of cases) {
    test(`${name} with ${mechanism}: produce and consume 300 records`, async () => {
      await produceAndConsume(client(), as(mechanism), { count: 300 });
    });
  }

  test('Java with PLAIN: commit, stop, resume; the tools describe the group over SCRAM', async () => {
    const report = await commitStopResume(java, as('PLAIN'), { count: 200 });
    const described = await describeConsumerGroup(cluster.classpath, as('SCRAM-SHA-256'), report.group);
    expect(described.reduce((sum, r) => sum + (r.currentOffset ?? 0), 0)).toBe(210);
  });

  test('a wrong password is rejected (Java and python fail fast with the reason)', async () => {
    const topic = uniqueName('sasl-wrong');
    await createTopics(as('PLAIN'), [{ topic }]);
    const wrong = (mechanism: SaslMechanism): ClientTarget => ({
      bootstrap: cluster.bootstrap,
      sasl: { mechanism, username: cluster.sasl?.users[0]?.username ?? '', password: 'wrong' },
    });
    await expect(java.produce(wrong('SCRAM-SHA-256'), { topic, count: 1 })).rejects.toThrow(
      /Authentication failed/,
    );
    await expect(pythonClient.produce(wrong('PLAIN'), { topic, count: 1 })).rejects.toThrow(
      /Authentication failed/i,
    );
  });
});
