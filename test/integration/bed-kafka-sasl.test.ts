import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SASLOptions } from 'kafkajs';
import { KAFKA_VERSION, startKafka } from '../bed/kafka.js';
import type { KafkaCluster } from '../bed/kafka.js';
import { kafkaClient, roundTrip } from '../bed/roundtrip.js';

describe(`bed: Kafka ${KAFKA_VERSION} with SASL_PLAINTEXT`, () => {
  let cluster: KafkaCluster;
  beforeAll(async () => {
    const t0 = Date.now();
    cluster = await startKafka({ sasl: true });
    console.log(`[bed] SASL Kafka ${cluster.version} ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  const login = (
    mechanism: 'scram-sha-256' | 'scram-sha-512' | 'plain',
    username: string,
    password: string,
    retries = 8,
  ) =>
    kafkaClient(cluster.bootstrap, {
      sasl: { mechanism, username, password } as SASLOptions,
      retry: { retries },
    });

  it('has an admin and a non-admin user', () => {
    expect(cluster.sasl?.users.map((u) => u.username)).toEqual(['admin', 'alice']);
  });

  it('lets the admin log in with SCRAM-SHA-256 and use the cluster', async () => {
    const admin = cluster.sasl!.users[0]!;
    const values = ['s1', 's2'];
    expect(
      await roundTrip(
        login('scram-sha-256', admin.username, admin.password),
        `bed-sasl-${Date.now()}`,
        values,
      ),
    ).toEqual(values);
  });

  it('accepts SCRAM-SHA-512 and PLAIN logins of the non-admin user', async () => {
    const alice = cluster.sasl!.users[1]!;
    for (const mechanism of ['scram-sha-512', 'plain'] as const) {
      const admin = login(mechanism, alice.username, alice.password).admin();
      await admin.connect();
      // Metadata needs no ACL; the user is authenticated.
      expect((await admin.describeCluster()).brokers).toHaveLength(1);
      await admin.disconnect();
    }
  });

  it('rejects a wrong password', async () => {
    const admin = login('scram-sha-256', 'admin', 'wrong-password', 0).admin();
    await expect(admin.connect()).rejects.toThrow(/SASL|[Aa]uthentication/);
    await admin.disconnect().catch(() => undefined);
  });

  it('denies the non-admin user without ACLs (StandardAuthorizer is on)', async () => {
    const alice = cluster.sasl!.users[1]!;
    const admin = login('scram-sha-256', alice.username, alice.password).admin();
    await admin.connect();
    try {
      const error: unknown = await admin
        .createTopics({ topics: [{ topic: `bed-sasl-denied-${Date.now()}` }] })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      // kafkajs wraps per-topic errors in an aggregate error.
      const types = ((error as { errors?: { type?: string }[] } | undefined)?.errors ?? []).map(
        (e) => e.type,
      );
      expect(types).toEqual(['TOPIC_AUTHORIZATION_FAILED']);
    } finally {
      await admin.disconnect();
    }
  });
});
