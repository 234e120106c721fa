// The proxy core against the bed's real single broker: clients work through it as if it were the
// cluster, and never learn a broker address.
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { Kafka, logLevel } from 'kafkajs';
import { kafkajsClient } from '../bed/clients/kafkajs.js';
import { commitStopResume, produceAndConsume } from '../bed/clients/scenarios.js';
import { startProxy } from '../harness/proxy.js';
import type { RunningProxy } from '../harness/proxy.js';

describe('proxy core, single broker', () => {
  const brokerBootstrap = inject('kafkaBootstrap');
  let proxy: RunningProxy;

  beforeAll(async () => {
    proxy = await startProxy(brokerBootstrap);
  });
  afterAll(async () => {
    await proxy?.stop();
  });

  test('metadata seen through the proxy lists only proxy addresses', async () => {
    const kafka = new Kafka({ brokers: [proxy.bootstrap], logLevel: logLevel.NOTHING });
    const admin = kafka.admin();
    await admin.connect();
    try {
      const cluster = await admin.describeCluster();
      const brokerPorts = brokerBootstrap.split(',').map((hp) => Number(hp.split(':')[1]));
      expect(cluster.brokers.length).toBeGreaterThan(0);
      for (const b of cluster.brokers) {
        expect(b.host).toBe('127.0.0.1');
        expect(b.port).toBe(proxy.port + 1 + b.nodeId);
        expect(brokerPorts).not.toContain(b.port);
      }
    } finally {
      await admin.disconnect();
    }
  });

  test('kafkajs produces and consumes 1,000 records in a group through the proxy', async () => {
    await produceAndConsume(kafkajsClient, { bootstrap: proxy.bootstrap });
  });

  test('kafkajs commits, stops and resumes through the proxy', async () => {
    await commitStopResume(kafkajsClient, { bootstrap: proxy.bootstrap });
  });
});
