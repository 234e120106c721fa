import { describe, expect, inject, it } from 'vitest';
import { KAFKA_VERSION } from '../bed/kafka.js';
import { kafkaClient, roundTrip } from '../bed/roundtrip.js';

describe('bed: single Kafka broker from the global setup', () => {
  it('provides the default version and its classpath', () => {
    expect(inject('kafkaVersion')).toBe(
      process.env['KOP_BOOTSTRAP'] ? (process.env['KOP_KAFKA_VERSION'] ?? KAFKA_VERSION) : KAFKA_VERSION,
    );
    const jars = inject('kafkaClasspath').split(':');
    expect(jars.some((jar) => /kafka_2\.13-[\d.]+\.jar$/.test(jar))).toBe(true);
    expect(jars.some((jar) => /kafka-clients-[\d.]+\.jar$/.test(jar))).toBe(true);
    expect(jars.some((jar) => /kafka-tools-[\d.]+\.jar$/.test(jar))).toBe(true);
  });

  it('answers Metadata with one broker', async () => {
    const admin = kafkaClient(inject('kafkaBootstrap')).admin();
    await admin.connect();
    try {
      const { brokers } = await admin.describeCluster();
      expect(brokers).toHaveLength(1);
    } finally {
      await admin.disconnect();
    }
  });

  it('produces and consumes records through a consumer group', async () => {
    const values = ['a', 'b', 'c', 'd', 'e'];
    const received = await roundTrip(
      kafkaClient(inject('kafkaBootstrap')),
      `bed-single-${Date.now()}`,
      values,
    );
    expect(received).toEqual(values);
  });
});
