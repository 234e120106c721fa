import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KAFKA_COMPAT_VERSION, startKafka } from '../bed/kafka.js';
import type { KafkaCluster } from '../bed/kafka.js';
import { kafkaClient, roundTrip } from '../bed/roundtrip.js';

describe(`bed: single Kafka ${KAFKA_COMPAT_VERSION} broker`, () => {
  let cluster: KafkaCluster;
  beforeAll(async () => {
    const t0 = Date.now();
    cluster = await startKafka({ version: KAFKA_COMPAT_VERSION });
    console.log(`[bed] Kafka ${cluster.version} ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  it('runs the 3.9 jars and serves a produce/consume round trip', async () => {
    expect(cluster.version).toBe(KAFKA_COMPAT_VERSION);
    expect(cluster.classpath).toContain(`kafka_2.13-${KAFKA_COMPAT_VERSION}.jar`);
    expect(cluster.logTail(undefined, 400)).toMatch(
      new RegExp(`Kafka version: ${KAFKA_COMPAT_VERSION.replace(/\./g, '\\.')}`),
    );
    const values = ['p', 'q'];
    expect(await roundTrip(kafkaClient(cluster.bootstrap), `bed-compat-${Date.now()}`, values)).toEqual(
      values,
    );
  });
});

describe(`bed: Kafka ${KAFKA_COMPAT_VERSION} with SASL_PLAINTEXT`, () => {
  let cluster: KafkaCluster;
  beforeAll(async () => {
    cluster = await startKafka({ version: KAFKA_COMPAT_VERSION, sasl: true });
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  it('accepts a SCRAM-SHA-512 login of the admin and rejects a wrong password', async () => {
    const [admin] = cluster.sasl!.users;
    const ok = kafkaClient(cluster.bootstrap, {
      sasl: { mechanism: 'scram-sha-512', username: admin!.username, password: admin!.password },
    }).admin();
    await ok.connect();
    expect((await ok.describeCluster()).brokers).toHaveLength(1);
    await ok.disconnect();

    const bad = kafkaClient(cluster.bootstrap, {
      sasl: { mechanism: 'scram-sha-512', username: admin!.username, password: 'wrong' },
      retry: { retries: 0 },
    }).admin();
    await expect(bad.connect()).rejects.toThrow(/SASL|[Aa]uthentication/);
    await bad.disconnect().catch(() => undefined);
  });
});
