// Group tools on groups whose offsets live in the proxy's store. A broker forgets an empty group
// once it holds none of its offsets (here after offsets.retention.check.interval.ms, set to 1 s;
// by default 10 minutes), and after a restart; through the proxy such a group must still look as
// an empty group with committed offsets looks on a broker. A 3-broker cluster, so that a group is
// listed by the one broker that coordinates it.
//
// - Differential: a "simple" group (commits with generation -1, as assign() consumers and admin
//   tools send) and a classic consumer group, each once through the proxy (offsets in the store,
//   the broker forgot the group) and once directly at the broker (offsets in __consumer_offsets):
//   ListGroups v0/v4/v5 on every broker, DescribeGroups v0/v5 and ConsumerGroupDescribe answer
//   the same, and the group is listed by exactly one broker. On the embedded store also a KIP-848
//   group of the Java client. ListGroups v5 with state and type filters (as tools spell them)
//   answers the same; DeleteGroups of a group with a live member is refused with NON_EMPTY_GROUP
//   as the broker refuses it, its stored offsets kept until the member left.
// - Kafka's kafka-consumer-groups of 4.x and 3.9 (--list, --describe, --describe --members,
//   --reset-offsets, --delete-offsets, --delete) and the Java AdminClient (listConsumerGroups,
//   describeConsumerGroups, listConsumerGroupOffsets, deleteConsumerGroups) through the proxy, on
//   the embedded store, Redis and ZooKeeper; and after a broker restart.
// - A stopped Kafka Streams app's streams group (KIP-1071; embedded store): ListGroups,
//   DescribeGroups, ConsumerGroupDescribe and StreamsGroupDescribe (its topology included, not its
//   epochs) and kafka-streams-groups (--list, --describe*, reset dry-run, --reset-offsets
//   --execute, --delete-offsets, --delete) answer as for the app run directly at the broker.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Kafka, logLevel, type Consumer } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { EmbeddedStore } from '../../backends/embedded-store.js';
import { openStore } from '../../backends/open-store.js';
import type { OffsetStore } from '../../backends/store.js';
import { ApiKey } from '../../protocol/messages/index.js';
import type { DeleteGroupsResponse } from '../../protocol/messages/delete-groups-response.js';
import type { ConsumerGroupDescribeResponse } from '../../protocol/messages/consumer-group-describe-response.js';
import type { DescribeGroupsResponse } from '../../protocol/messages/describe-groups-response.js';
import type { ListGroupsResponse } from '../../protocol/messages/list-groups-response.js';
import type { StreamsGroupDescribeResponse } from '../../protocol/messages/streams-group-describe-response.js';
import { javaClient } from '../bed/clients/java.js';
import type { JavaClient } from '../bed/clients/java.js';
import { javaStreamsClient, type JavaStreamsClient } from '../bed/clients/java-streams.js';
import {
  consumerGroups,
  describeConsumerGroup,
  listConsumerGroups,
  parseTable,
  streamsGroupToolSteps,
  type StreamsGroupToolRun,
} from '../bed/clients/kafka-tools.js';
import { createTopics, kafkajsClient } from '../bed/clients/kafkajs.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { kafkaClasspath, startKafka } from '../bed/kafka.js';
import type { KafkaCluster } from '../bed/kafka.js';
import { startOffsetProxy } from '../harness/offset-proxy.js';
import type { OffsetProxy } from '../harness/offset-proxy.js';
import { RawClient } from '../harness/raw-client.js';
import { wordCountText } from '../harness/word-count-text.js';
import { commitOnce } from '../reliability/commit-checker.js';

const PARTITIONS = 3;
let correlation = 1;

let kafka: KafkaCluster;
let tools39: string;
let java: JavaClient;
const dirs: string[] = [];

beforeAll(async () => {
  [kafka, tools39] = await Promise.all([
    startKafka({ brokers: 3, serverProperties: ['offsets.retention.check.interval.ms=1000'] }),
    kafkaClasspath('3.9.2'),
  ]);
  java = await javaClient(kafka.classpath);
}, 240_000);
afterAll(async () => {
  await kafka?.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** The address of broker `nodeId` through the proxy (listen port + 1 + node id). */
const viaProxy = (proxy: OffsetProxy, nodeId: number): string => `127.0.0.1:${proxy.port + 1 + nodeId}`;
const direct = (nodeId: number): string => {
  const b = kafka.brokers.find((x) => x.nodeId === nodeId)!;
  return `${b.host}:${b.port}`;
};

async function ask<T>(address: string, apiKey: number, version: number, body: unknown): Promise<T> {
  const c = await RawClient.connect(address);
  try {
    return await c.request<T>(apiKey, version, correlation++, body);
  } finally {
    c.close();
  }
}

/** ListGroups v0, v4 and v5 of every broker at `addressOf`: the entries naming `group`, by broker. */
async function listings(addressOf: (nodeId: number) => string, group: string) {
  const out: Record<string, unknown>[] = [];
  for (const b of kafka.brokers) {
    for (const v of [0, 4, 5]) {
      const r = await ask<ListGroupsResponse>(addressOf(b.nodeId), ApiKey.ListGroups, v, {
        statesFilter: [],
        typesFilter: [],
      });
      for (const g of r.groups.filter((x) => x.groupId === group))
        out.push({ v, node: b.nodeId, protocolType: g.protocolType, state: g.groupState, type: g.groupType });
    }
  }
  return out;
}

/** DescribeGroups v0 and v5 and ConsumerGroupDescribe of `group` at `address`, the group id left out. */
async function descriptions(address: string, group: string) {
  const out: unknown[] = [];
  for (const v of [0, 5]) {
    const r = await ask<DescribeGroupsResponse>(address, ApiKey.DescribeGroups, v, {
      groups: [group],
      includeAuthorizedOperations: v >= 3,
    });
    const { groupId: _g, ...rest } = r.groups[0]!;
    out.push({ v, ...rest });
  }
  const c = await ask<ConsumerGroupDescribeResponse>(address, ApiKey.ConsumerGroupDescribe, 0, {
    groupIds: [group],
    includeAuthorizedOperations: false,
  });
  const { groupId: _g, errorMessage, ...rest } = c.groups[0]!;
  out.push({ cgd: rest, message: errorMessage?.replace(group, '<group>') ?? null });
  return out;
}

async function coordinatorOf(group: string): Promise<number> {
  const r = await ask<{ coordinators: { nodeId: number; errorCode: number }[] }>(
    kafka.bootstrap.split(',')[0]!,
    ApiKey.FindCoordinator,
    4,
    { key: '', keyType: 0, coordinatorKeys: [group] },
  );
  return r.coordinators[0]!.nodeId;
}

/** Until the broker lists none of `groups` any more (it forgets empty groups without offsets). */
async function brokerForgets(groups: string[]): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const listed = new Set<string>();
    for (const b of kafka.brokers) {
      const r = await ask<ListGroupsResponse>(direct(b.nodeId), ApiKey.ListGroups, 0, {
        statesFilter: [],
        typesFilter: [],
      });
      for (const g of r.groups) listed.add(g.groupId);
    }
    if (groups.every((g) => !listed.has(g))) return;
    if (Date.now() > deadline)
      throw new Error(`the broker still lists ${groups.filter((g) => listed.has(g))}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** A simple group (generation -1 commits) and a classic group, through `bootstrap`. */
async function makeGroups(bootstrap: string, topic: string, label: string) {
  const simple = uniqueName(`${label}-simple`);
  const classic = uniqueName(`${label}-classic`);
  const c = await RawClient.connect(bootstrap.split(',')[0]!);
  try {
    // Through the proxy any listener answers OffsetCommit; at the broker it must be the coordinator.
    const at =
      bootstrap === kafka.bootstrap ? await RawClient.connect(direct(await coordinatorOf(simple))) : c;
    expect(await commitOnce(at, simple, topic, PARTITIONS, 7n)).toEqual([0, 0, 0]);
    if (at !== c) at.close();
  } finally {
    c.close();
  }
  const consumed = await kafkajsClient.consume({ bootstrap }, { topic, group: classic, max: 12 });
  expect(consumed.timedOut).toBe(false);
  return { simple, classic };
}

interface Filter {
  statesFilter: string[];
  typesFilter: string[];
}

/** v5 filters as tools send them, including a spelling the broker matches case-insensitively. */
const FILTERS: Filter[] = [
  { statesFilter: ['Empty'], typesFilter: [] },
  { statesFilter: ['Stable', 'PreparingRebalance'], typesFilter: [] },
  { statesFilter: ['empty'], typesFilter: [] },
  { statesFilter: [], typesFilter: ['classic'] },
  { statesFilter: [], typesFilter: ['consumer'] },
  { statesFilter: [], typesFilter: ['Classic'] },
  { statesFilter: ['Empty'], typesFilter: ['classic'] },
  { statesFilter: ['Dead'], typesFilter: [] },
];

/** A kafkajs consumer joined to `group` on `topic`, with offset 5 of partition 0 committed. */
async function liveMember(bootstrap: string, topic: string, group: string): Promise<Consumer> {
  const consumer = new Kafka({ brokers: bootstrap.split(','), logLevel: logLevel.NOTHING }).consumer({
    groupId: group,
  });
  const joined = new Promise<void>((resolve) => consumer.on(consumer.events.GROUP_JOIN, () => resolve()));
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({ autoCommit: false, eachMessage: async () => {} });
  await joined;
  await consumer.commitOffsets([{ topic, partition: 0, offset: '5' }]);
  return consumer;
}

interface StoreCase {
  name: string;
  open(): Promise<OffsetStore>;
}

const stores: StoreCase[] = [
  {
    name: 'embedded',
    open: async () => {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'kop-groups-tools-'));
      dirs.push(dir);
      return new EmbeddedStore({ dataDir: dir });
    },
  },
  { name: 'Redis', open: () => openStore(`${inject('redisUrl')}?prefix=${uniqueName('gt')}`) },
  { name: 'ZooKeeper', open: () => openStore(`zk://${inject('zkConnect')}/${uniqueName('gt')}`) },
];

describe.each(stores)('groups whose offsets are in the $name store', ({ name, open }) => {
  let store: OffsetStore;
  let proxy: OffsetProxy;
  let topic: string;
  let groups: { simple: string; classic: string };
  beforeAll(async () => {
    store = await open();
    proxy = await startOffsetProxy(kafka.bootstrap, store);
    topic = uniqueName(`gt-${name.toLowerCase()}`);
    await createTopics({ bootstrap: kafka.bootstrap }, [{ topic, partitions: PARTITIONS }]);
    await kafkajsClient.produce({ bootstrap: kafka.bootstrap }, { topic, count: 60 });
    groups = await makeGroups(proxy.bootstrap, topic, name.toLowerCase());
    await brokerForgets([groups.simple, groups.classic]);
  }, 120_000);
  afterAll(async () => {
    await proxy?.stop();
    await store?.close();
  });

  test('ListGroups, DescribeGroups and ConsumerGroupDescribe answer as the broker does for such groups', async () => {
    const atBroker = await makeGroups(kafka.bootstrap, topic, `${name.toLowerCase()}-direct`);
    for (const kind of ['simple', 'classic'] as const) {
      const mine = groups[kind];
      const theirs = atBroker[kind];
      const proxied = await listings((n) => viaProxy(proxy, n), mine);
      const expected = await listings(direct, theirs);
      // Listed once per version, by the broker FindCoordinator names for it.
      expect(proxied.map((l) => l['node'])).toEqual([0, 4, 5].map(() => expect.any(Number)));
      expect(new Set(proxied.map((l) => l['node']))).toEqual(new Set([await coordinatorOf(mine)]));
      const strip = (ls: Record<string, unknown>[]) => ls.map(({ node: _n, ...rest }) => rest);
      expect(strip(proxied), kind).toEqual(strip(expected));
      expect(await descriptions(viaProxy(proxy, await coordinatorOf(mine)), mine), kind).toEqual(
        await descriptions(direct(await coordinatorOf(theirs)), theirs),
      );
    }
  });

  test('ListGroups v5 state and type filters answer as the broker does for such groups', async () => {
    const atBroker = await makeGroups(kafka.bootstrap, topic, `${name.toLowerCase()}-filters`);
    const filtered = async (addressOf: (nodeId: number) => string, group: string, f: Filter) => {
      const out: Record<string, unknown>[] = [];
      for (const b of kafka.brokers) {
        const r = await ask<ListGroupsResponse>(addressOf(b.nodeId), ApiKey.ListGroups, 5, f);
        for (const g of r.groups.filter((x) => x.groupId === group))
          out.push({ protocolType: g.protocolType, state: g.groupState, type: g.groupType });
      }
      return out;
    };
    for (const f of FILTERS)
      for (const kind of ['simple', 'classic'] as const)
        expect(
          await filtered((n) => viaProxy(proxy, n), groups[kind], f),
          `${kind} ${JSON.stringify(f)}`,
        ).toEqual(await filtered(direct, atBroker[kind], f));
  });

  test('DeleteGroups of a group with a live member is refused as the broker refuses it, its offsets kept', async () => {
    const answers: Record<string, number[]> = {};
    for (const [label, bootstrap, addressOf] of [
      ['proxy', proxy.bootstrap, (n: number) => viaProxy(proxy, n)],
      ['broker', kafka.bootstrap, direct],
    ] as const) {
      const group = uniqueName(`${name.toLowerCase()}-live-${label}`);
      const member = await liveMember(bootstrap, topic, group);
      try {
        const at = addressOf(await coordinatorOf(group));
        const codes: number[] = [];
        for (const v of [0, 2]) {
          const r = await ask<DeleteGroupsResponse>(at, ApiKey.DeleteGroups, v, { groupsNames: [group] });
          codes.push(r.results[0]!.errorCode);
        }
        if (label === 'proxy') expect((await store.fetch(group, null)).map((o) => o.offset)).toEqual([5n]);
        await member.disconnect();
        // Once the member left, the group goes, and with it its offsets.
        const r = await ask<DeleteGroupsResponse>(at, ApiKey.DeleteGroups, 2, { groupsNames: [group] });
        codes.push(r.results[0]!.errorCode);
        if (label === 'proxy') expect(await store.fetch(group, null)).toEqual([]);
        answers[label] = codes;
      } finally {
        await member.disconnect();
      }
    }
    expect(answers['proxy']).toEqual(answers['broker']);
    expect(answers['broker']).toEqual([68, 68, 0]); // NON_EMPTY_GROUP, then NONE
  });

  test('kafka-consumer-groups 4.x and 3.9 and the AdminClient list, describe, reset, delete them', async () => {
    const target = { bootstrap: proxy.bootstrap };
    for (const classpath of [kafka.classpath, tools39]) {
      const listed = await listConsumerGroups(classpath, target);
      expect(listed.filter((g) => g === groups.simple)).toHaveLength(1);
      expect(listed.filter((g) => g === groups.classic)).toHaveLength(1);
      const rows = await describeConsumerGroup(classpath, target, groups.classic);
      expect(rows.length).toBeGreaterThan(0);
      expect(rows.reduce((s, r) => s + (r.currentOffset ?? 0), 0)).toBe(12);
      expect(rows.every((r) => r.consumerId === null)).toBe(true);
      const members = await consumerGroups(classpath, target, [
        '--describe',
        '--members',
        '--group',
        groups.classic,
      ]);
      // No member rows (4.x prints the header, 3.9 says the group has no active members).
      expect(parseTable(members)).toEqual([]);
      const state = await consumerGroups(classpath, target, [
        '--describe',
        '--state',
        '--group',
        groups.simple,
      ]);
      expect(state).toMatch(/Empty/);
    }

    // --reset-offsets (4.x), then --delete-offsets (3.9) of the simple group.
    await consumerGroups(kafka.classpath, target, [
      '--reset-offsets',
      '--group',
      groups.simple,
      '--topic',
      topic,
      '--to-offset',
      '3',
      '--execute',
    ]);
    expect((await store.fetch(groups.simple, null)).map((o) => o.offset)).toEqual([3n, 3n, 3n]);
    await consumerGroups(tools39, target, ['--delete-offsets', '--group', groups.simple, '--topic', topic]);
    expect(await store.fetch(groups.simple, null)).toEqual([]);

    // The AdminClient.
    expect((await java.listGroups(target)).find((g) => g.group === groups.classic)?.state).toBe('Empty');
    expect(await java.describeGroup(target, groups.classic)).toEqual({
      state: 'Empty',
      members: 0,
      simple: false,
    });
    expect((await java.groupOffsets(target, groups.classic)).reduce((s, o) => s + o.offset, 0)).toBe(12);

    // --delete (4.x): the offsets go with the group, and the group from every listing.
    await consumerGroups(kafka.classpath, target, ['--delete', '--group', groups.classic]);
    expect(await store.fetch(groups.classic, null)).toEqual([]);
    expect(await listConsumerGroups(tools39, target)).not.toContain(groups.classic);
    // AdminClient deleteConsumerGroups of a group only the store knows.
    const another = (await makeGroups(proxy.bootstrap, topic, `${name.toLowerCase()}-again`)).classic;
    await brokerForgets([another]);
    await java.deleteGroup(target, another);
    expect(await store.fetch(another, null)).toEqual([]);
    // Some twenty JVM tool runs: on a loaded 2-core machine well over the default two minutes.
  }, 480_000);
});

describe('a KIP-848 group of the Java client, offsets in the embedded store', () => {
  let store: OffsetStore;
  let proxy: OffsetProxy;
  let topic: string;
  beforeAll(async () => {
    store = await stores[0]!.open();
    proxy = await startOffsetProxy(kafka.bootstrap, store);
    topic = uniqueName('gt-kip848');
    await createTopics({ bootstrap: kafka.bootstrap }, [{ topic, partitions: PARTITIONS }]);
    await kafkajsClient.produce({ bootstrap: kafka.bootstrap }, { topic, count: 30 });
  }, 120_000);
  afterAll(async () => {
    await proxy?.stop();
    await store?.close();
  });

  test('looks as the broker shows an empty consumer group with offsets', async () => {
    const consumer = await javaClient(kafka.classpath, { protocol: 'consumer' });
    const [mine, theirs] = [uniqueName('kip848'), uniqueName('kip848-direct')];
    for (const [bootstrap, group] of [
      [proxy.bootstrap, mine],
      [kafka.bootstrap, theirs],
    ] as const) {
      const r = await consumer.consume({ bootstrap }, { topic, group, max: 9 });
      expect(r.timedOut).toBe(false);
    }
    await brokerForgets([mine]);
    const strip = (ls: Record<string, unknown>[]) => ls.map(({ node: _n, ...rest }) => rest);
    expect(strip(await listings((n) => viaProxy(proxy, n), mine))).toEqual(
      strip(await listings(direct, theirs)),
    );
    // What a broker that forgot the group cannot tell: its epochs and assignor. The rest is equal.
    const comparable = (ds: unknown[]) =>
      ds.map((d) => {
        const x = d as { cgd?: Record<string, unknown> };
        if (x.cgd === undefined) return d;
        const { groupEpoch: _e, assignmentEpoch: _a, assignorName: _n, ...cgd } = x.cgd;
        return { ...x, cgd };
      });
    expect(comparable(await descriptions(viaProxy(proxy, await coordinatorOf(mine)), mine))).toEqual(
      comparable(await descriptions(direct(await coordinatorOf(theirs)), theirs)),
    );
  });
});

describe('after a broker restart', () => {
  test('an idle group in the store is still listed and described through the proxy', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'kop-groups-restart-'));
    dirs.push(dir);
    const store = new EmbeddedStore({ dataDir: dir });
    const proxy = await startOffsetProxy(kafka.bootstrap, store);
    try {
      const topic = uniqueName('gt-restart');
      await createTopics({ bootstrap: kafka.bootstrap }, [{ topic, partitions: PARTITIONS }]);
      await kafkajsClient.produce({ bootstrap: kafka.bootstrap }, { topic, count: 30 });
      const { classic } = await makeGroups(proxy.bootstrap, topic, 'restart');
      const nodeId = await coordinatorOf(classic);
      await kafka.stopBroker(nodeId);
      await kafka.startBroker(nodeId);
      const target = { bootstrap: proxy.bootstrap };
      for (const classpath of [kafka.classpath, tools39]) {
        expect(await listConsumerGroups(classpath, target)).toContain(classic);
        const rows = await describeConsumerGroup(classpath, target, classic);
        expect(rows.reduce((s, r) => s + (r.currentOffset ?? 0), 0)).toBe(12);
      }
    } finally {
      await proxy.stop();
      await store.close();
    }
  });
});

// A Kafka Streams app with group.protocol=streams (KIP-1071), stopped: through the proxy the broker
// forgets its group (it holds none of its offsets), directly it keeps it (it holds them). The
// group must still look the same, to the raw APIs and to kafka-streams-groups, whose reset and
// describe need the group's topology (its subtopologies' source topics).
describe('a streams group of a stopped Kafka Streams app, offsets in the embedded store', () => {
  let store: OffsetStore;
  let proxy: OffsetProxy;
  let streams: JavaStreamsClient;
  const runs = {} as Record<'proxy' | 'direct', { app: string; input: string; output: string }>;
  beforeAll(async () => {
    store = await stores[0]!.open();
    proxy = await startOffsetProxy(kafka.bootstrap, store);
    streams = await javaStreamsClient(kafka.classpath);
    const lines = wordCountText().lines.slice(0, 300);
    await Promise.all(
      (['proxy', 'direct'] as const).map(async (route) => {
        const bootstrap = route === 'proxy' ? proxy.bootstrap : kafka.bootstrap;
        const run = {
          app: uniqueName(`gt-streams-${route}`),
          input: uniqueName(`gt-streams-in-${route}`),
          output: uniqueName(`gt-streams-out-${route}`),
        };
        runs[route] = run;
        await createTopics({ bootstrap: kafka.bootstrap }, [
          { topic: run.input, partitions: PARTITIONS },
          { topic: run.output, partitions: PARTITIONS },
        ]);
        await streams.produceLines({ bootstrap: kafka.bootstrap }, run.input, lines);
        const r = await streams.wordCount(
          { bootstrap },
          {
            applicationId: run.app,
            input: run.input,
            output: run.output,
            protocol: 'streams',
            guarantee: 'at_least_once',
            minLines: lines.length,
          },
        );
        expect({ route, deaths: r.deaths, timedOut: r.timedOut }).toEqual({
          route,
          deaths: [],
          timedOut: false,
        });
      }),
    );
    await brokerForgets([runs.proxy.app]);
  }, 480_000);
  afterAll(async () => {
    await proxy?.stop();
    await store?.close();
  });

  /** The route's names replaced by placeholders, in anything JSON can hold. */
  const placeholders = (route: 'proxy' | 'direct') => ({
    [runs[route].app]: '<app>',
    [runs[route].input]: '<input>',
    [runs[route].output]: '<output>',
  });
  const comparable = (route: 'proxy' | 'direct', value: unknown): unknown => {
    let text = JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v));
    for (const [name, p] of Object.entries(placeholders(route))) text = text.replaceAll(name, p);
    return JSON.parse(text);
  };

  /** StreamsGroupDescribe v0 and v1 of the route's group at its coordinator. */
  async function streamsDescriptions(route: 'proxy' | 'direct') {
    const group = runs[route].app;
    const node = await coordinatorOf(group);
    const address = route === 'proxy' ? viaProxy(proxy, node) : direct(node);
    const out: unknown[] = [];
    for (const v of [0, 1]) {
      const r = await ask<StreamsGroupDescribeResponse>(address, ApiKey.StreamsGroupDescribe, v, {
        groupIds: [group],
        includeAuthorizedOperations: false,
        includeTopologyDescription: false,
      });
      // What only the broker's group held (streams-group-views.ts): its epochs.
      const {
        groupEpoch: _e,
        assignmentEpoch: _a,
        ...rest
      } = comparable(route, r.groups[0]) as Record<string, unknown>;
      out.push({ v, ...rest });
    }
    return out;
  }

  test('ListGroups, DescribeGroups, ConsumerGroupDescribe and StreamsGroupDescribe answer as the broker does', async () => {
    const typed = async (addressOf: (nodeId: number) => string, group: string) => {
      const out: unknown[] = [];
      for (const b of kafka.brokers)
        for (const f of [
          { statesFilter: [], typesFilter: ['streams'] },
          { statesFilter: ['Empty'], typesFilter: ['Streams'] },
        ]) {
          const r = await ask<ListGroupsResponse>(addressOf(b.nodeId), ApiKey.ListGroups, 5, f);
          for (const g of r.groups.filter((x) => x.groupId === group))
            out.push({ f, protocolType: g.protocolType, state: g.groupState, type: g.groupType });
        }
      return out;
    };
    const strip = (ls: Record<string, unknown>[]) => ls.map(({ node: _n, ...rest }) => rest);
    const [mine, theirs] = [runs.proxy.app, runs.direct.app];
    const expected = {
      listings: strip(await listings(direct, theirs)),
      typed: await typed(direct, theirs),
      descriptions: await descriptions(direct(await coordinatorOf(theirs)), theirs),
      streams: await streamsDescriptions('direct'),
    };
    console.info(`a stopped streams group at the broker: ${JSON.stringify(expected, null, 1)}`);
    expect({
      listings: strip(await listings((n) => viaProxy(proxy, n), mine)),
      typed: await typed((n) => viaProxy(proxy, n), mine),
      descriptions: await descriptions(viaProxy(proxy, await coordinatorOf(mine)), mine),
      streams: await streamsDescriptions('proxy'),
    }).toEqual(expected);
  });

  test(
    'kafka-streams-groups lists, describes, resets, deletes offsets and deletes it as directly',
    { timeout: 480_000 },
    async () => {
      // Both routes at once (their groups and topics are their own), as clients-streams does.
      const step = (route: 'direct' | 'proxy'): Promise<StreamsGroupToolRun> => {
        const { app, input, output } = runs[route];
        const target = { bootstrap: route === 'proxy' ? proxy.bootstrap : kafka.bootstrap };
        return streamsGroupToolSteps(kafka.classpath, target, app, input, { [output]: '<output>' });
      };
      const [direct, viaProxy] = await Promise.all([step('direct'), step('proxy')]);
      const runsOf: Record<'direct' | 'proxy', StreamsGroupToolRun> = { direct, proxy: viaProxy };
      console.info(
        `kafka-streams-groups on a stopped streams group, directly:\n${runsOf.direct.steps.join('\n---\n')}`,
      );
      expect(runsOf.proxy).toEqual(runsOf.direct);
      expect(runsOf.direct.listed).toBe(true);
      expect(runsOf.direct.listedAfterDelete).toBe(false);
      // Real answers: the committed offsets, then reset to 0.
      expect(runsOf.direct.steps[4]).toMatch(/^<app> <input> 0 [1-9]/m);
      expect(runsOf.direct.steps[6]).toMatch(/^<app> <input> 0 0$/m);
      expect(await store.fetch(runs.proxy.app, null)).toEqual([]);
      expect(await store.getGroup(runs.proxy.app)).toBeNull();
    },
  );
});
