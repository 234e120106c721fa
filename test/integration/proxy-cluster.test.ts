// The proxy in front of a 3-broker cluster: every client of the bed works through it in consumer
// groups and sees only proxy addresses. Also the Java AdminClient, kafka-consumer-groups and
// exactly-once through it.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Kafka, logLevel } from 'kafkajs';
import { ApiKey } from '../../protocol/messages/index.js';
import type { FindCoordinatorResponse } from '../../protocol/messages/find-coordinator-response.js';
import { javaClient } from '../bed/clients/java.js';
import type { JavaClient } from '../bed/clients/java.js';
import { createTopics, kafkajsClient } from '../bed/clients/kafkajs.js';
import { describeConsumerGroup } from '../bed/clients/kafka-tools.js';
import { kcatClient } from '../bed/clients/kcat.js';
import { pythonClient } from '../bed/clients/python.js';
import { expectCommittedAfter, produceAndConsume, uniqueName } from '../bed/clients/scenarios.js';
import { recordValue, type BedClient, type ClientTarget } from '../bed/clients/types.js';
import { startKafka } from '../bed/kafka.js';
import type { KafkaCluster } from '../bed/kafka.js';
import { startProxy } from '../harness/proxy.js';
import type { RunningProxy } from '../harness/proxy.js';
import { RawClient } from '../harness/raw-client.js';

let cluster: KafkaCluster;
let proxy: RunningProxy;
let javaClassic: JavaClient;
let javaConsumer: JavaClient;
let viaProxy: ClientTarget;

beforeAll(async () => {
  cluster = await startKafka({ brokers: 3 });
  [javaClassic, javaConsumer] = await Promise.all([
    javaClient(cluster.classpath, { protocol: 'classic' }),
    javaClient(cluster.classpath, { protocol: 'consumer' }),
  ]);
  proxy = await startProxy(cluster.bootstrap);
  viaProxy = { bootstrap: proxy.bootstrap };
}, 240_000);
afterAll(async () => {
  await proxy?.stop();
  await cluster?.stop();
});

const brokerPorts = () => cluster.brokers.map((b) => b.port);

function expectProxyAddress(node: { nodeId?: number; id?: number; host: string; port: number }): void {
  const id = node.nodeId ?? node.id!;
  expect(node.host).toBe('127.0.0.1');
  expect(node.port).toBe(proxy.port + 1 + id);
  expect(brokerPorts()).not.toContain(node.port);
}

/** The group's coordinator as the proxy reports it (FindCoordinator v3 through the proxy). */
async function coordinatorOf(group: string): Promise<number> {
  const client = await RawClient.connect(proxy.bootstrap);
  try {
    const body = await client.request<FindCoordinatorResponse>(ApiKey.FindCoordinator, 3, 1, {
      key: group,
      keyType: 0,
      coordinatorKeys: [],
    });
    expect(body.errorCode).toBe(0);
    expectProxyAddress(body);
    return body.nodeId;
  } finally {
    client.close();
  }
}

describe('3-broker cluster through the proxy', () => {
  test('metadata seen by kafkajs and the Java AdminClient lists only proxy addresses', async () => {
    const kafka = new Kafka({ brokers: [proxy.bootstrap], logLevel: logLevel.NOTHING });
    const admin = kafka.admin();
    await admin.connect();
    try {
      const described = await admin.describeCluster();
      expect(described.brokers.map((b) => b.nodeId).sort()).toEqual([1, 2, 3]);
      described.brokers.forEach(expectProxyAddress);
    } finally {
      await admin.disconnect();
    }
    const java = await javaClassic.describeCluster(viaProxy);
    expect(java.nodes.map((n) => n.id).sort()).toEqual([1, 2, 3]);
    java.nodes.forEach(expectProxyAddress);
    if (java.controller) expectProxyAddress(java.controller);
  }, 60_000);

  test('FindCoordinator through the proxy names a proxy address for every group', async () => {
    const seen = new Set<number>();
    for (let i = 0; i < 20; i++) seen.add(await coordinatorOf(uniqueName('fc')));
    for (const id of seen) expect([1, 2, 3]).toContain(id);
  });

  const clients = (): BedClient[] => [kafkajsClient, javaClassic, javaConsumer, kcatClient, pythonClient];
  for (const name of ['kafkajs', 'java-classic', 'java-consumer', 'kcat', 'python-confluent']) {
    test(`${name} produces and consumes in a group (replication factor 3)`, async () => {
      const client = clients().find((c) => c.name === name)!;
      await produceAndConsume(client, viaProxy, { count: 500, replicationFactor: 3, admin: viaProxy });
    }, 120_000);
  }

  test('Java AdminClient and kafka-consumer-groups describe a group through the proxy', async () => {
    const topic = uniqueName('cg-describe');
    const group = `${topic}-group`;
    await createTopics(viaProxy, [{ topic, partitions: 3, replicationFactor: 3 }]);
    await javaClassic.produce(viaProxy, { topic, count: 90 });
    const consumed = await javaClassic.consume(viaProxy, { topic, group, max: 60 });
    expect(consumed.records).toHaveLength(60);

    const offsets = await javaClassic.groupOffsets(viaProxy, group);
    expectCommittedAfter(offsets, consumed.records, topic);

    const rows = await describeConsumerGroup(cluster.classpath, viaProxy, group);
    // A group with no live members is described by its committed partitions: the 60 records may
    // have come from only some of the 3 partitions.
    expect(rows.map((r) => r.partition)).toEqual(offsets.map((o) => o.partition).sort((a, b) => a - b));
    expect(rows.reduce((s, r) => s + (r.currentOffset ?? 0), 0)).toBe(60);
    for (const r of rows) expect(r.lag).toBe((r.logEndOffset ?? 0) - (r.currentOffset ?? 0));
    expect(rows.reduce((s, r) => s + (r.logEndOffset ?? 0), 0)).toBeLessThanOrEqual(90);
  }, 120_000);

  test('exactly-once read-process-write (Java transactions) through the proxy', async () => {
    const input = uniqueName('eos-in');
    const output = uniqueName('eos-out');
    const group = `${input}-group`;
    await createTopics(viaProxy, [
      { topic: input, partitions: 3, replicationFactor: 3 },
      { topic: output, partitions: 3, replicationFactor: 3 },
    ]);
    await javaClassic.produce(viaProxy, { topic: input, count: 200 });
    const result = await javaClassic.transform(viaProxy, {
      input,
      output,
      group,
      transactionalId: `${input}-tx`,
      max: 200,
      abortFirst: true,
    });
    expect(result.timedOut).toBe(false);
    expect(result.count).toBe(200);
    expect(result.aborted).toBeGreaterThanOrEqual(1);
    expect(result.committed.reduce((s, c) => s + c.offset, 0)).toBe(200);
    // A read_committed consumer sees every record exactly once, upper-cased, and nothing aborted.
    const read = await javaClassic.consume(viaProxy, {
      topic: output,
      group: `${output}-reader`,
      max: 200,
      isolation: 'read_committed',
    });
    expect(read.timedOut).toBe(false);
    const values = read.records.map((r) => r.value).sort();
    expect(new Set(values).size).toBe(200);
    expect(values).toEqual(Array.from({ length: 200 }, (_, i) => recordValue(i).toUpperCase()).sort());
  }, 180_000);

  test('after everything above, kafkajs still works and the metadata still has only proxy addresses', async () => {
    await produceAndConsume(kafkajsClient, viaProxy, { count: 200, replicationFactor: 3, admin: viaProxy });
    const java = await javaClassic.describeCluster(viaProxy);
    expect(java.nodes).toHaveLength(3);
    java.nodes.forEach(expectProxyAddress);
  }, 120_000);
});
