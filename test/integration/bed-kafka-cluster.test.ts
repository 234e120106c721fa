import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KAFKA_VERSION, startKafka } from '../bed/kafka.js';
import type { KafkaCluster } from '../bed/kafka.js';
import { kafkaClient, roundTrip } from '../bed/roundtrip.js';

describe(`bed: 3-broker Kafka ${KAFKA_VERSION} cluster`, () => {
  let cluster: KafkaCluster;
  beforeAll(async () => {
    const t0 = Date.now();
    cluster = await startKafka({ brokers: 3 });
    console.log(
      `[bed] 3-broker Kafka ${cluster.version} ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`,
    );
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  it('lists 3 brokers and replicates internal topics 3 ways', async () => {
    expect(cluster.brokers.map((b) => b.nodeId)).toEqual([1, 2, 3]);
    expect(cluster.bootstrap.split(',')).toHaveLength(3);
    const admin = kafkaClient(cluster.bootstrap).admin();
    await admin.connect();
    try {
      expect((await admin.describeCluster()).brokers).toHaveLength(3);
      const values = ['x', 'y', 'z'];
      expect(await roundTrip(kafkaClient(cluster.bootstrap), `bed-cluster-${Date.now()}`, values)).toEqual(
        values,
      );
      const { topics } = await admin.fetchTopicMetadata({ topics: ['__consumer_offsets'] });
      for (const partition of topics[0]!.partitions) expect(partition.replicas).toHaveLength(3);
    } finally {
      await admin.disconnect();
    }
  });

  it('keeps serving with one broker stopped, and takes it back', async () => {
    await cluster.stopBroker(2);
    const others = cluster.brokers
      .filter((b) => b.nodeId !== 2)
      .map((b) => `${b.host}:${b.port}`)
      .join(',');
    const admin = kafkaClient(others).admin();
    await admin.connect();
    try {
      // min.insync.replicas=2: acks=all writes and group commits still succeed with 2 of 3.
      const values = ['one', 'two', 'three'];
      expect(await roundTrip(kafkaClient(others), `bed-cluster-degraded-${Date.now()}`, values)).toEqual(
        values,
      );
      expect((await admin.describeCluster()).brokers.map((b) => b.nodeId).sort()).toEqual([1, 3]);

      await cluster.startBroker(2);
      expect((await admin.describeCluster()).brokers.map((b) => b.nodeId).sort()).toEqual([1, 2, 3]);
    } finally {
      await admin.disconnect();
    }
    expect(cluster.logTail(2, 200)).toContain('Kafka Server started');
  });
});
