// Real clients through the CLI proxy, once with the native relay (--native-relay on) and once on
// JavaScript alone (--native-relay off), the same scenarios against the same broker: every record
// through exactly once and in order, the group's commits where they belong, a client's own group
// resumed. The native proxy's metrics must show that its connections did move to the native path
// (and back, for the frames it reads), so these scenarios really crossed it.
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { javaClient } from '../bed/clients/java.js';
import type { JavaClient } from '../bed/clients/java.js';
import { kafkajsClient } from '../bed/clients/kafkajs.js';
import { kcatClient } from '../bed/clients/kcat.js';
import { pythonClient } from '../bed/clients/python.js';
import { commitStopResume, expectExactlyPaddedRecords, produceAndConsume } from '../bed/clients/scenarios.js';
import type { BedClient } from '../bed/clients/types.js';
import { producerPerformance, consumerPerformance } from '../bed/clients/kafka-tools.js';
import { createTopics } from '../bed/clients/kafkajs.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { ensureBuilt, freePortRange, spawnProxy } from '../harness/proxy.js';
import type { ProxyProcess } from '../harness/proxy.js';

/** The sum of the proxy's /metrics samples whose name and labels start with `prefix` (0: none). */
async function sample(httpPort: number, prefix: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith(prefix))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

describe('the native relay with real clients', { timeout: 180_000 }, () => {
  const kafka = inject('kafkaBootstrap');
  const classpath = inject('kafkaClasspath');
  const paths = ['on', 'off'] as const;
  const proxies = new Map<(typeof paths)[number], { proxy: ProxyProcess; http: number }>();
  let java: JavaClient;

  beforeAll(async () => {
    await ensureBuilt();
    java = await javaClient(classpath);
    for (const mode of paths) {
      const http = await freePortRange(0);
      const proxy = await spawnProxy([
        '--bootstrap-server',
        kafka,
        '--native-relay',
        mode,
        // Every connection moves after its first request passed on unread, so that the few requests
        // of these scenarios cross between the two paths as often as they can (with the relay off
        // the option is refused: it would have no effect).
        ...(mode === 'on' ? ['--native-relay-after', '1'] : []),
        '--http',
        `127.0.0.1:${http}`,
      ]);
      proxies.set(mode, { proxy, http });
    }
  }, 240_000);

  afterAll(async () => {
    for (const { proxy } of proxies.values()) expect(await proxy.stop()).toBe(0);
  });

  const moves = async (mode: (typeof paths)[number]) => {
    const { http } = proxies.get(mode)!;
    return {
      toNative: await sample(http, 'kop_native_relay_handovers_total{to="native"}'),
      toJavaScript: await sample(http, 'kop_native_relay_handovers_total{to="javascript"}'),
    };
  };

  const clients = (): BedClient[] => [java, kafkajsClient, kcatClient, pythonClient];

  test.each(['java', 'kafkajs', 'kcat', 'python-confluent'])(
    '%s: 5,000 records produced and consumed in a group, a group resumed at its commits, on both paths',
    async (name) => {
      const client = clients().find((c) => c.name.startsWith(name.split('-')[0]!))!;
      for (const mode of paths) {
        const target = { bootstrap: proxies.get(mode)!.proxy.bootstrap };
        const before = await moves(mode);
        await produceAndConsume(client, target, { count: 5_000, admin: { bootstrap: kafka } });
        await commitStopResume(client, target, { count: 2_000, admin: { bootstrap: kafka } });
        const after = await moves(mode);
        console.log(
          `[native] ${name}, --native-relay ${mode}: ${after.toNative - before.toNative} moves to the native path, ${after.toJavaScript - before.toJavaScript} back`,
        );
        if (mode === 'on') {
          expect(
            after.toNative - before.toNative,
            `${name}: connections moved to the native path`,
          ).toBeGreaterThan(0);
        } else {
          expect(after).toEqual({ toNative: 0, toJavaScript: 0 });
        }
      }
    },
  );

  // Throughput-tuned producers send Produce requests of several 256 KiB batches, which span many
  // socket reads: the native path passes them on as they arrive (with a reservation in the
  // request memory pool) instead of handing such connections back to JavaScript.
  test.each([
    [1024, 12_000],
    [10_240, 1_200],
  ])(
    'a Java producer with batch.size=262144 and %i-byte records: every record intact, on the native path',
    async (valueBytes, count) => {
      const { proxy } = proxies.get('on')!;
      const target = { bootstrap: proxy.bootstrap };
      const topic = uniqueName('native-batches');
      await createTopics({ bootstrap: kafka }, [{ topic, partitions: 3 }]);
      const before = await moves('on');
      const produced = await java.produce(target, { topic, count, batchSize: 262_144, valueBytes });
      expect(produced.count).toBe(count);
      const after = await moves('on');
      console.log(
        `[native] batch.size=262144, ${valueBytes}-byte records: ${after.toNative - before.toNative} moves to the native path, ${after.toJavaScript - before.toJavaScript} back`,
      );
      expect(after.toNative - before.toNative).toBeGreaterThan(0);
      const consumed = await java.consume(target, {
        topic,
        group: `${topic}-group`,
        max: count,
        timeoutMs: 90_000,
      });
      expect(consumed.timedOut, `${consumed.records.length} of ${count} records`).toBe(false);
      expectExactlyPaddedRecords(consumed.records, 0, count, valueBytes);
    },
  );

  test("Kafka's perf tools: 100,000 records of 1 KB each way, counted by the proxy as by the tools", async () => {
    const { proxy, http } = proxies.get('on')!;
    const topic = uniqueName('native-perf');
    await createTopics({ bootstrap: kafka }, [{ topic, partitions: 3 }]);
    const before = await sample(http, 'kop_bytes_total{direction="client_in"}');
    const produced = await producerPerformance(
      classpath,
      { bootstrap: proxy.bootstrap },
      {
        topic,
        numRecords: 100_000,
        recordSize: 1024,
        acks: 'all',
      },
    );
    expect(produced.records).toBe(100_000);
    const movesBeforeConsume = await sample(http, 'kop_native_relay_handovers_total{to="native"}');
    const consumed = await consumerPerformance(
      classpath,
      { bootstrap: proxy.bootstrap },
      {
        topic,
        numRecords: 100_000,
      },
    );
    expect(consumed.records).toBe(100_000);
    // A Java 4.x consumer's Fetch v17-18 answers are walked natively (NodeEndpoints at their
    // end): its connections move to the native path too.
    const consumerMoves =
      (await sample(http, 'kop_native_relay_handovers_total{to="native"}')) - movesBeforeConsume;
    expect(consumerMoves).toBeGreaterThan(0);
    // The records' bytes went in from the producer: counted whether the native path or
    // JavaScript relayed them.
    const inBytes = (await sample(http, 'kop_bytes_total{direction="client_in"}')) - before;
    expect(inBytes).toBeGreaterThan(100_000 * 1024);
    expect(await sample(http, 'kop_native_relay_handovers_total{to="native"}')).toBeGreaterThan(0);
    // The answers the native path relayed are in the request counts, handed over at each scrape.
    expect(await sample(http, 'kop_requests_total{api="Produce"')).toBeGreaterThan(100);
  });
});
