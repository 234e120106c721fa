// Share groups (KIP-932) on the bed's 3-broker Kafka 4.4 cluster, directly and through the proxy
// (embedded store). A share consumer fetches from every partition's leader itself (ShareFetch and
// ShareAcknowledge go to the leaders, not to a coordinator), so on a cluster the proxy must keep
// it on proxy addresses: in Metadata, FindCoordinator, and the NodeEndpoints a ShareFetch or
// ShareAcknowledge answer names when a leader moved. A tap in front of the proxy
// (test/harness/tapped-proxy.ts) reads every such answer the clients got, and the records each
// ShareFetch answer gave out: every record acquired through the tap means no share fetch went to
// a broker directly.
//
// - several share consumers of one group, a topic whose partitions are led by all three brokers:
//   every record arrives, as directly;
// - a leader change (a broker stopped) while share consumers run: every record still arrives.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { EmbeddedStore } from '../../backends/embedded-store.js';
import { ApiKey } from '../../protocol/messages/index.js';
import type { FindCoordinatorResponse } from '../../protocol/messages/find-coordinator-response.js';
import type { MetadataResponse } from '../../protocol/messages/metadata-response.js';
import type { ShareAcknowledgeResponse } from '../../protocol/messages/share-acknowledge-response.js';
import type { ShareFetchResponse } from '../../protocol/messages/share-fetch-response.js';
import { javaClient, type JavaClient } from '../bed/clients/java.js';
import { javaShareClient, type JavaShareClient, type ShareConsumeResult } from '../bed/clients/java-share.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import type { ClientTarget } from '../bed/clients/types.js';
import { KAFKA_VERSION, startKafka, type KafkaCluster } from '../bed/kafka.js';
import type { TappedAnswer } from '../harness/request-tap.js';
import { startTappedProxy, type TappedProxy } from '../harness/tapped-proxy.js';
import { until } from '../reliability/fault-helpers.js';

type Route = 'direct' | 'proxy';
const ROUTES: Route[] = ['direct', 'proxy'];

/** What the clients of one test were told through the proxy, read from the tap. */
class ToldThroughProxy {
  /** Every broker address in an answer, as "host:port". */
  readonly addresses = new Set<string>();
  /** NodeEndpoints entries in ShareFetch and ShareAcknowledge answers (they name moved leaders). */
  nodeEndpoints = 0;
  /** Leader changes announced in ShareFetch answers (a partition's current leader given). */
  leaderHints = 0;
  /** "topicId:partition:offset" of every record a ShareFetch answer gave out. */
  readonly acquired = new Set<string>();

  take(a: TappedAnswer): void {
    switch (a.apiKey) {
      case ApiKey.Metadata:
        for (const b of (a.body as MetadataResponse).brokers) this.addresses.add(`${b.host}:${b.port}`);
        return;
      case ApiKey.FindCoordinator: {
        const body = a.body as FindCoordinatorResponse;
        for (const c of body.coordinators) if (c.errorCode === 0) this.addresses.add(`${c.host}:${c.port}`);
        if (body.coordinators.length === 0 && body.errorCode === 0)
          this.addresses.add(`${body.host}:${body.port}`);
        return;
      }
      case ApiKey.ShareAcknowledge:
      case ApiKey.ShareFetch: {
        const body = a.body as ShareFetchResponse | ShareAcknowledgeResponse;
        for (const n of body.nodeEndpoints) this.addresses.add(`${n.host}:${n.port}`);
        this.nodeEndpoints += body.nodeEndpoints.length;
        if (a.apiKey !== ApiKey.ShareFetch) return;
        for (const t of (body as ShareFetchResponse).responses)
          for (const p of t.partitions) {
            if (p.currentLeader.leaderId >= 0) this.leaderHints++;
            for (const r of p.acquiredRecords)
              for (let o = r.firstOffset; o <= r.lastOffset; o++)
                this.acquired.add(`${t.topicId}:${p.partitionIndex}:${o}`);
          }
        return;
      }
    }
  }

  /** Distinct records of `topicId` given out through the tap. */
  acquiredOf(topicId: string): number {
    let n = 0;
    for (const k of this.acquired) if (k.startsWith(`${topicId}:`)) n++;
    return n;
  }
}

describe(`share groups on a 3-broker Kafka ${KAFKA_VERSION} cluster, directly and through the proxy`, () => {
  let cluster: KafkaCluster;
  let dir: string;
  let store: EmbeddedStore;
  let proxy: TappedProxy;
  let java: JavaClient;
  let share: JavaShareClient;
  const targets = {} as Record<Route, ClientTarget>;
  let told: ToldThroughProxy;

  beforeAll(async () => {
    cluster = await startKafka({ brokers: 3 });
    dir = mkdtempSync(path.join(os.tmpdir(), 'kop-share-cluster-'));
    store = new EmbeddedStore({ dataDir: dir });
    proxy = await startTappedProxy(cluster.bootstrap, store);
    proxy.tap.decodeAnswers = new Set([
      ApiKey.Metadata,
      ApiKey.FindCoordinator,
      ApiKey.ShareFetch,
      ApiKey.ShareAcknowledge,
    ]);
    proxy.tap.onAnswer = (a) => told.take(a);
    targets.direct = { bootstrap: cluster.bootstrap };
    targets.proxy = { bootstrap: proxy.bootstrap };
    [java, share] = await Promise.all([javaClient(cluster.classpath), javaShareClient(cluster.classpath)]);
  });

  afterAll(async () => {
    await proxy?.stop();
    await store?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
    await cluster?.stop();
  });

  /** A topic of `partitions` partitions on all brokers and a share group reading it from the start. */
  async function prepare(
    route: Route,
    label: string,
    partitions: number,
  ): Promise<{ topic: string; group: string }> {
    const target = targets[route];
    const topic = uniqueName(`share-cluster-${label}-${route}`);
    const group = `${topic}-g`;
    await java.createTopic(target, topic, partitions, 3);
    await share.configureGroup(target, group, {
      'share.auto.offset.reset': 'earliest',
      // The shortest lock a 4.4 broker allows: records held where a broker went come back soon.
      'share.record.lock.duration.ms': '15000',
    });
    return { topic, group };
  }

  /** The topic's id and the brokers leading its partitions, as the cluster says. */
  async function layout(topic: string): Promise<{ topicId: string; leaders: number[] }> {
    const md = await proxy.proxy.offsets.cluster.metadata([topic]);
    const t = md.topics.find((x) => x.name === topic)!;
    return { topicId: t.topicId, leaders: t.partitions.map((p) => p.leaderId) };
  }

  const keys = (count: number): string[] => Array.from({ length: count }, (_, i) => `key-${i}`).sort();
  const distinctKeys = (r: ShareConsumeResult): string[] =>
    [...new Set(r.deliveries.map((d) => d.key))].sort();

  /** Every address the clients were given through the proxy is the proxy's. */
  function expectOnlyProxyAddresses(): void {
    const foreign = [...told.addresses].filter((a) => {
      const [host, port] = a.split(':');
      return !proxy.isProxyAddress(host!, Number(port));
    });
    expect(told.addresses.size).toBeGreaterThan(0);
    expect(foreign, `broker addresses the clients were given: ${foreign.join(', ')}`).toEqual([]);
    expect(proxy.tap.undecoded).toBe(0);
  }

  test('several share consumers of one group get every record from partitions led by every broker', async () => {
    told = new ToldThroughProxy();
    const count = 3000;
    const topics = {} as Record<Route, string>;
    const runs = {} as Record<Route, ShareConsumeResult>;
    await Promise.all(
      ROUTES.map(async (route) => {
        const { topic, group } = await prepare(route, 'many', 6);
        topics[route] = topic;
        expect((await java.produce(targets[route], { topic, count })).count).toBe(count);
        runs[route] = await share.consume(targets[route], {
          topic,
          group,
          consumers: 3,
          expectDistinct: count,
          quietMs: 2000,
          timeoutMs: 120_000,
        });
      }),
    );
    const { topicId, leaders } = await layout(topics.proxy);
    // The partitions are led by all three brokers: share fetches go to each of them.
    expect(new Set(leaders).size).toBe(3);
    for (const route of ROUTES) {
      expect(runs[route].timedOut, route).toBe(false);
      expect(distinctKeys(runs[route]), route).toEqual(keys(count));
    }
    // Every record the proxy route's consumers got was given out in a ShareFetch answer through
    // the tap: none fetched from a broker directly.
    expect(told.acquiredOf(topicId)).toBe(count);
    expectOnlyProxyAddresses();
    console.info(
      `[share-cluster] ${count} records, leaders ${leaders.join(',')}; deliveries direct ` +
        `${runs.direct.deliveries.length}, proxy ${runs.proxy.deliveries.length}; addresses told ` +
        `through the proxy: ${[...told.addresses].join(' ')}`,
    );
  });

  test('a leader change while share consumers run: every record still arrives', async () => {
    told = new ToldThroughProxy();
    const half = 1500;
    const prepared = {} as Record<Route, { topic: string; group: string }>;
    for (const route of ROUTES) prepared[route] = await prepare(route, 'leader', 6);
    const { topicId, leaders } = await layout(prepared.proxy.topic);
    for (const route of ROUTES)
      expect((await java.produce(targets[route], { topic: prepared[route].topic, count: half })).count).toBe(
        half,
      );
    const consuming = Promise.all(
      ROUTES.map((route) =>
        share.consume(targets[route], {
          ...prepared[route],
          consumers: 3,
          expectDistinct: 2 * half,
          quietMs: 2000,
          timeoutMs: 180_000,
        }),
      ),
    );
    // Once the consumers through the proxy are under way, the broker leading most of the proxy
    // route's partitions goes: its partitions get new leaders, on both routes' topics.
    let stopped: number | undefined;
    try {
      await until(() => told.acquiredOf(topicId) > 0, 'records acquired through the proxy', 120_000);
      const byLeader = new Map<number, number>();
      for (const l of leaders) byLeader.set(l, (byLeader.get(l) ?? 0) + 1);
      stopped = [...byLeader].sort((a, b) => b[1] - a[1])[0]![0];
      await cluster.stopBroker(stopped);
      // The second half is written to the new leaders while the consumers run.
      for (const route of ROUTES) {
        const produced = await java.produce(targets[route], {
          topic: prepared[route].topic,
          count: half,
          start: half,
        });
        expect(produced.count).toBe(half);
      }
      const [direct, viaProxy] = await consuming;
      const runs: Record<Route, ShareConsumeResult> = { direct: direct!, proxy: viaProxy! };
      const after = await layout(prepared.proxy.topic);
      expect(after.leaders).not.toContain(stopped);
      for (const route of ROUTES) {
        expect(runs[route].timedOut, route).toBe(false);
        expect(distinctKeys(runs[route]), route).toEqual(keys(2 * half));
      }
      expect(told.acquiredOf(topicId)).toBe(2 * half);
      expectOnlyProxyAddresses();
      console.info(
        `[share-cluster] leader change (broker ${stopped} stopped): leaders ${leaders.join(',')} -> ` +
          `${after.leaders.join(',')}; deliveries direct ${runs.direct.deliveries.length}, proxy ` +
          `${runs.proxy.deliveries.length} of ${2 * half}; NodeEndpoints through the proxy ` +
          `${told.nodeEndpoints}, leader hints ${told.leaderHints}`,
      );
    } finally {
      await consuming.catch(() => undefined);
      if (stopped !== undefined) await cluster.startBroker(stopped);
    }
  }, 400_000);
});
