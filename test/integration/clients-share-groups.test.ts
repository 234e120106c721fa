// Share groups (KIP-932) through the proxy, as directly: Kafka 4.4's own clients against the bed's
// single 4.4.0 broker at its defaults (share groups are on), each scenario run once directly and
// once through the proxy (embedded store) and compared. Share-group state is the broker's (the
// share coordinator's per-record acquisition state, docs/design.md "Share groups"): the proxy
// passes the share APIs on and rewrites the broker addresses of ShareFetch and ShareAcknowledge
// answers, and its offset service leaves share groups alone.
//
// - several KafkaShareConsumers of one group receive every record;
// - explicit acknowledgement: accepted and rejected records come once, released ones again;
// - a consumer SIGKILLed with records acquired: another member gets them again;
// - a record released at every delivery is archived at the group's delivery count limit;
// - kafka-console-share-consumer receives every record;
// - kafka-share-groups --list/--describe (--members, --offsets, --state)/--reset-offsets/
//   --delete-offsets/--delete answer the same;
// - BrokerApiVersionsCommand shows the share APIs usable at the broker's versions.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { EmbeddedStore } from '../../backends/embedded-store.js';
import { javaClient, type JavaClient } from '../bed/clients/java.js';
import { javaShareClient, type JavaShareClient, type ShareDelivery } from '../bed/clients/java-share.js';
import { comparableOutput, kafkaTool } from '../bed/clients/kafka-tools.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import type { ClientTarget } from '../bed/clients/types.js';
import { startOffsetProxy, type OffsetProxy } from '../harness/offset-proxy.js';

type Route = 'direct' | 'proxy';
const ROUTES: Route[] = ['direct', 'proxy'];

describe('share groups directly and through the proxy (Kafka 4.4, embedded store)', () => {
  const brokerBootstrap = inject('kafkaBootstrap');
  const classpath = inject('kafkaClasspath');
  let dir: string;
  let store: EmbeddedStore;
  let proxy: OffsetProxy;
  let java: JavaClient;
  let share: JavaShareClient;
  const targets = {} as Record<Route, ClientTarget>;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'kop-share-'));
    store = new EmbeddedStore({ dataDir: dir });
    proxy = await startOffsetProxy(brokerBootstrap, store);
    targets.direct = { bootstrap: brokerBootstrap };
    targets.proxy = { bootstrap: proxy.bootstrap };
    [java, share] = await Promise.all([javaClient(classpath), javaShareClient(classpath)]);
  });
  afterAll(async () => {
    await proxy?.stop();
    await store?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /**
   * A topic of `count` records and a share group reading it from the start (a share group starts
   * at the latest offset by default), both made through `route`.
   */
  async function prepare(
    route: Route,
    label: string,
    opts: { partitions: number; count: number; configs?: Record<string, string> },
  ): Promise<{ topic: string; group: string }> {
    const target = targets[route];
    const topic = uniqueName(`share-${label}-${route}`);
    const group = `${topic}-g`;
    await java.createTopic(target, topic, opts.partitions);
    await share.configureGroup(target, group, { 'share.auto.offset.reset': 'earliest', ...opts.configs });
    const produced = await java.produce(target, { topic, count: opts.count });
    expect(produced.count).toBe(opts.count);
    return { topic, group };
  }

  /** Runs `scenario` directly and through the proxy at the same time. */
  async function bothRoutes<T>(scenario: (route: Route) => Promise<T>): Promise<Record<Route, T>> {
    const [direct, viaProxy] = await Promise.all(ROUTES.map(scenario));
    return { direct: direct!, proxy: viaProxy! };
  }

  const keys = (count: number): string[] => Array.from({ length: count }, (_, i) => `key-${i}`).sort();
  const distinctKeys = (ds: ShareDelivery[]): string[] => [...new Set(ds.map((d) => d.key))].sort();
  /** Each key's deliveries in order: [deliveryCount, acknowledgement]. */
  const historyByKey = (ds: ShareDelivery[]): Record<string, [number, string][]> => {
    const out: Record<string, [number, string][]> = {};
    for (const d of ds) (out[d.key] ??= []).push([d.deliveryCount, d.ack]);
    return out;
  };

  test('several share consumers of one group receive every record', async () => {
    const count = 3000;
    const runs = await bothRoutes(async (route) => {
      const { topic, group } = await prepare(route, 'many', { partitions: 3, count });
      return share.consume(targets[route], {
        topic,
        group,
        consumers: 3,
        expectDeliveries: count,
        quietMs: 2000,
        timeoutMs: 90_000,
      });
    });
    for (const route of ROUTES) {
      expect(runs[route].timedOut, route).toBe(false);
      expect(distinctKeys(runs[route].deliveries), route).toEqual(keys(count));
    }
    console.info(
      `share consumers: ${count} records; deliveries direct ${runs.direct.deliveries.length}, ` +
        `proxy ${runs.proxy.deliveries.length}; members that got records: direct ` +
        `${new Set(runs.direct.deliveries.map((d) => d.consumer)).size}, proxy ` +
        `${new Set(runs.proxy.deliveries.map((d) => d.consumer)).size}`,
    );
  });

  test('explicit acknowledgement: accepted and rejected records come once, released ones again', async () => {
    const count = 30;
    const runs = await bothRoutes(async (route) => {
      const { topic, group } = await prepare(route, 'ack', { partitions: 2, count });
      return share.consume(targets[route], {
        topic,
        group,
        ack: 'cycle',
        // Every record once, and the released third of them once more.
        expectDeliveries: count + count / 3,
        quietMs: 3000,
        timeoutMs: 90_000,
      });
    });
    const expected: Record<string, [number, string][]> = {};
    for (let i = 0; i < count; i++) {
      expected[`key-${i}`] =
        i % 3 === 0
          ? [[1, 'ACCEPT']]
          : i % 3 === 1
            ? [
                [1, 'RELEASE'],
                [2, 'ACCEPT'],
              ]
            : [[1, 'REJECT']];
    }
    for (const route of ROUTES) expect(historyByKey(runs[route].deliveries), route).toEqual(expected);
    console.info(
      `explicit acks: deliveries direct ${runs.direct.deliveries.length}, proxy ${runs.proxy.deliveries.length}`,
    );
  });

  test('records held by a SIGKILLed consumer are delivered again to another member', async () => {
    const count = 30;
    const runs = await bothRoutes(async (route) => {
      // The shortest lock a 4.4 broker allows by default (group.share.min.record.lock.duration.ms):
      // the records come back when it expires, if not when the dead connection closes.
      const { topic, group } = await prepare(route, 'kill', {
        partitions: 3,
        count,
        configs: { 'share.record.lock.duration.ms': '15000' },
      });
      const crashed = await share.consume(targets[route], {
        topic,
        group,
        ack: 'accept',
        expectDeliveries: count,
        sigkillWhenAcquired: true,
        timeoutMs: 60_000,
      });
      const survivor = await share.consume(targets[route], {
        topic,
        group,
        expectDeliveries: count,
        timeoutMs: 90_000,
      });
      return { crashed, survivor };
    });
    for (const route of ROUTES) {
      const { crashed, survivor } = runs[route];
      expect(crashed.killed, route).toBe(true);
      const held = crashed.deliveries.filter((d) => d.ack === 'held');
      expect(held.length, route).toBeGreaterThan(0);
      expect(survivor.timedOut, route).toBe(false);
      expect(distinctKeys(survivor.deliveries), route).toEqual(keys(count));
      const again = new Map(survivor.deliveries.map((d) => [d.key, d.deliveryCount]));
      for (const h of held) expect(again.get(h.key), `${route} ${h.key}`).toBeGreaterThanOrEqual(2);
    }
    console.info(
      `SIGKILL: held direct ${runs.direct.crashed.deliveries.length}, proxy ` +
        `${runs.proxy.crashed.deliveries.length}; delivered again to the survivor: direct ` +
        `${runs.direct.survivor.deliveries.length}/${count}, proxy ${runs.proxy.survivor.deliveries.length}/${count}`,
    );
  });

  test('a record released at every delivery is archived at the delivery count limit', async () => {
    const count = 6;
    const limit = 3;
    const runs = await bothRoutes(async (route) => {
      const { topic, group } = await prepare(route, 'limit', {
        partitions: 1,
        count,
        configs: { 'share.delivery.count.limit': String(limit) },
      });
      return share.consume(targets[route], {
        topic,
        group,
        ack: 'release',
        expectDeliveries: count * limit,
        quietMs: 3000,
        timeoutMs: 90_000,
      });
    });
    const expected = Object.fromEntries(
      keys(count).map((k) => [
        k,
        Array.from({ length: limit }, (_, i): [number, string] => [i + 1, 'RELEASE']),
      ]),
    );
    for (const route of ROUTES) expect(historyByKey(runs[route].deliveries), route).toEqual(expected);
  });

  test('kafka-console-share-consumer receives every record', async () => {
    const count = 2000;
    const runs = await bothRoutes(async (route) => {
      const { topic, group } = await prepare(route, 'console', { partitions: 2, count });
      const target = targets[route];
      const result = await kafkaTool(classpath, 'consoleShareConsumer', target, [
        '--bootstrap-server',
        target.bootstrap,
        '--topic',
        topic,
        '--group',
        group,
        '--max-messages',
        String(count),
        '--formatter-property',
        'print.key=true',
      ]);
      return result.stdout
        .split('\n')
        .filter((l) => l.startsWith('key-'))
        .map((l) => l.split('\t')[0]!);
    });
    for (const route of ROUTES) expect([...runs[route]].sort(), route).toEqual(keys(count));
    console.info(
      `console share consumer: direct ${runs.direct.length}, proxy ${runs.proxy.length} of ${count}`,
    );
  });

  test('kafka-share-groups answers the same through the proxy', async () => {
    const count = 100;
    const runs = await bothRoutes(async (route) => {
      const { topic, group } = await prepare(route, 'tool', { partitions: 2, count });
      const target = targets[route];
      const consumed = await share.consume(target, { topic, group, expectDeliveries: count });
      expect(distinctKeys(consumed.deliveries)).toEqual(keys(count));
      const tool = async (args: string[]): Promise<string> =>
        comparableOutput(
          (
            await kafkaTool(classpath, 'shareGroupCommand', target, [
              '--bootstrap-server',
              target.bootstrap,
              ...args,
            ])
          ).stdout,
          { [group]: '<group>', [topic]: '<topic>' },
        );
      const g = ['--group', group];
      const listed = (await tool(['--list'])).split('\n').includes('<group>');
      const outputs = [
        await tool(['--describe', ...g]),
        await tool(['--describe', '--members', ...g]),
        await tool(['--describe', '--offsets', ...g]),
        await tool(['--describe', '--state', ...g]),
        await tool(['--describe', '--state', '--verbose', ...g]),
        await tool(['--reset-offsets', '--to-earliest', '--topic', topic, '--execute', ...g]),
        await tool(['--describe', '--offsets', ...g]),
        await tool(['--delete-offsets', '--topic', topic, ...g]),
        await tool(['--describe', '--offsets', ...g]),
        await tool(['--delete', ...g]),
      ];
      const listedAfterDelete = (await tool(['--list'])).split('\n').includes('<group>');
      return { listed, outputs, listedAfterDelete };
    });
    expect(runs.direct.listed).toBe(true);
    expect(runs.direct.listedAfterDelete).toBe(false);
    expect(runs.proxy).toEqual(runs.direct);
    // The answers are real ones: the offsets were reset to the start (the group's deletion: --list).
    expect(runs.direct.outputs[6]).toContain('<group> <topic> 0 0 ');
  });

  test('BrokerApiVersionsCommand shows the share APIs usable through the proxy as directly', async () => {
    const shareApis =
      /^\s*(ShareGroupHeartbeat|ShareGroupDescribe|ShareFetch|ShareAcknowledge|DescribeShareGroupOffsets|AlterShareGroupOffsets|DeleteShareGroupOffsets)\(\d+\): .*$/gm;
    const runs = await bothRoutes(async (route) => {
      const target = targets[route];
      const result = await kafkaTool(classpath, 'brokerApiVersions', target, [
        '--bootstrap-server',
        target.bootstrap,
      ]);
      return [...result.stdout.matchAll(shareApis)].map((m) => m[0].trim().replace(/,$/, ''));
    });
    expect(runs.direct).toHaveLength(7);
    for (const line of runs.proxy) expect(line).not.toMatch(/UNSUPPORTED/);
    expect(runs.proxy.filter((l) => /^Share(Fetch|Acknowledge)\(/.test(l))).toHaveLength(2);
    expect(runs.proxy).toEqual(runs.direct);
  });
});
