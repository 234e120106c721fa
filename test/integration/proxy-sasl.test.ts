// SASL through the proxy against a SASL_PLAINTEXT broker: the proxy authenticates nobody itself,
// it relays the exchange (SaslHandshake + SaslAuthenticate, or the legacy raw tokens after a
// SaslHandshake v0) and must not get in its way.
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { Kafka, logLevel } from 'kafkajs';
import { decodeResponseFrame, encodeRequestFrame } from '../../protocol/frames.js';
import { ApiKey } from '../../protocol/messages/index.js';
import type { MetadataResponse } from '../../protocol/messages/metadata-response.js';
import { javaClient } from '../bed/clients/java.js';
import type { JavaClient } from '../bed/clients/java.js';
import { kafkajsClient } from '../bed/clients/kafkajs.js';
import { produceAndConsume } from '../bed/clients/scenarios.js';
import type { ClientTarget, SaslMechanism } from '../bed/clients/types.js';
import { startKafka } from '../bed/kafka.js';
import type { KafkaCluster } from '../bed/kafka.js';
import { startProxy } from '../harness/proxy.js';
import type { RunningProxy } from '../harness/proxy.js';
import { RawClient, metadataRequest, withSize } from '../harness/raw-client.js';

let cluster: KafkaCluster;
let proxy: RunningProxy;
let java: JavaClient;
let admin: { username: string; password: string };

beforeAll(async () => {
  const [c, j] = await Promise.all([startKafka({ sasl: true }), javaClient(inject('kafkaClasspath'))]);
  cluster = c;
  java = j;
  admin = cluster.sasl!.users[0]!;
  proxy = await startProxy(cluster.bootstrap);
}, 180_000);
afterAll(async () => {
  await proxy?.stop();
  await cluster?.stop();
});

const target = (mechanism: SaslMechanism, password = admin.password): ClientTarget => ({
  bootstrap: proxy.bootstrap,
  sasl: { mechanism, username: admin.username, password },
});

function saslHandshakeV0(correlationId: number, mechanism: string): Buffer {
  return encodeRequestFrame(
    { apiKey: ApiKey.SaslHandshake, apiVersion: 0, correlationId, clientId: 'legacy-sasl-test' },
    { mechanism },
  );
}

/** SaslHandshake v0 + the raw PLAIN token; resolves with the server's raw token (empty on success). */
async function legacyPlain(client: RawClient, username: string, password: string): Promise<Buffer> {
  client.write(saslHandshakeV0(1, 'PLAIN'));
  const [handshake] = await client.read(1);
  const { header, body } = decodeResponseFrame(handshake!, ApiKey.SaslHandshake, 0);
  expect(header.correlationId).toBe(1);
  const hs = body as { errorCode: number; mechanisms: string[] };
  expect(hs.errorCode).toBe(0);
  expect(hs.mechanisms).toContain('PLAIN');
  // The raw token: size-prefixed, no Kafka header. "api key -19711"-style parsing would choke here.
  client.write(withSize(Buffer.from(`\0${username}\0${password}`)));
  const [token] = await client.read(1);
  return token!;
}

describe('SASL through the proxy', () => {
  for (const mechanism of ['SCRAM-SHA-256', 'PLAIN'] as const) {
    test(`kafkajs ${mechanism}: produce and consume in a group`, async () => {
      await produceAndConsume(kafkajsClient, target(mechanism), { count: 300 });
    });

    test(`Java ${mechanism}: produce and consume in a group`, async () => {
      await produceAndConsume(java, target(mechanism), { count: 300 });
    }, 120_000);
  }

  test('legacy SaslHandshake v0 + raw PLAIN token, then Metadata with proxy addresses', async () => {
    const client = await RawClient.connect(proxy.bootstrap);
    try {
      const token = await legacyPlain(client, admin.username, admin.password);
      expect(token.length).toBe(0);
      // Back to Kafka requests on the same connection: two pipelined ones, answered in order.
      client.write(Buffer.concat([metadataRequest(12, 2), metadataRequest(12, 3)]));
      const frames = await client.read(2);
      for (const [i, frame] of frames.entries()) {
        const { header, body } = decodeResponseFrame(frame, ApiKey.Metadata, 12);
        expect(header.correlationId).toBe(2 + i);
        const meta = body as MetadataResponse;
        expect(meta.brokers.length).toBe(1);
        for (const b of meta.brokers) {
          expect(b.host).toBe('127.0.0.1');
          expect(b.port).toBe(proxy.port + 1 + b.nodeId);
        }
      }
    } finally {
      client.close();
    }
  });

  test('legacy raw PLAIN to a broker listener of the proxy works too', async () => {
    const client = await RawClient.connect(`127.0.0.1:${proxy.port + 1 + cluster.brokers[0]!.nodeId}`);
    try {
      expect((await legacyPlain(client, admin.username, admin.password)).length).toBe(0);
      client.write(metadataRequest(12, 9));
      const [frame] = await client.read(1);
      expect(decodeResponseFrame(frame!, ApiKey.Metadata, 12).header.correlationId).toBe(9);
    } finally {
      client.close();
    }
  });

  test('a wrong password is refused: legacy raw exchange, kafkajs and Java', async () => {
    const client = await RawClient.connect(proxy.bootstrap);
    try {
      client.write(saslHandshakeV0(1, 'PLAIN'));
      await client.read(1);
      client.write(withSize(Buffer.from(`\0${admin.username}\0wrong-password`)));
      // The broker closes the connection on a failed legacy authentication; nothing else is served.
      expect(await client.closesWithin(10_000)).toBe(true);
    } finally {
      client.close();
    }

    const kafka = new Kafka({
      brokers: [proxy.bootstrap],
      sasl: { mechanism: 'scram-sha-256', username: admin.username, password: 'wrong-password' },
      logLevel: logLevel.NOTHING,
      retry: { retries: 0 },
    });
    const badAdmin = kafka.admin();
    await expect(badAdmin.connect()).rejects.toThrow(/SASL|authentic/i);
    await badAdmin.disconnect();

    await expect(java.describeCluster(target('PLAIN', 'wrong-password'))).rejects.toThrow(
      /SaslAuthenticationException|Authentication failed|authentication/i,
    );
  }, 90_000);
});
