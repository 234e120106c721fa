// Records golden frames from real traffic: starts a Kafka 4.4.0 and a 3.9.2 single broker from the
// bed, puts a recording relay in front of each (the broker advertises the relay's port, so
// Metadata/FindCoordinator send clients back through it), runs every client of the bed through it
// and writes one request/response pair per client x broker x api x version under
// test/golden/frames/, with an index (index.json).
//
//   npx tsx test/golden/record/record.ts            # both brokers
//   npx tsx test/golden/record/record.ts 4.4.0      # one broker (entries of the others are kept)
//
// Not part of `npm test`: it needs the bed (Java, Maven cache, kcat, python3-confluent-kafka).

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Kafka, logLevel } from 'kafkajs';

import { decodeRequestFrame, decodeResponseFrame } from '../../../protocol/frames.js';
import { ApiKey, getApiCodec } from '../../../protocol/messages/index.js';
import { KAFKA_COMPAT_VERSION, KAFKA_VERSION, startKafka } from '../../bed/kafka.js';
import type { KafkaCluster } from '../../bed/kafka.js';
import { FAST_JVM_FLAGS, javaClient } from '../../bed/clients/java.js';
import { createTopics, kafkajsClient } from '../../bed/clients/kafkajs.js';
import { describeConsumerGroup, resetConsumerGroupOffsets, toolMainClass } from '../../bed/clients/kafka-tools.js';
import { KCAT } from '../../bed/clients/kcat.js';
import { pythonClient } from '../../bed/clients/python.js';
import { assertSucceeded, runProgram } from '../../bed/clients/run.js';
import type { ClientTarget } from '../../bed/clients/types.js';
import { recordKey, recordValue } from '../../bed/clients/types.js';
import { startRelay } from './relay.js';
import type { RecordedPair } from './relay.js';
import type { GoldenEntry, GoldenIndex } from '../golden-index.js';

const FRAMES_DIR = fileURLToPath(new URL('../frames/', import.meta.url));
const INDEX_FILE = path.join(FRAMES_DIR, 'index.json');
/** Records every producer writes per topic (small, so Fetch responses stay small). */
const RECORDS = 3;
const MAX_RESPONSE = 64 * 1024;
/** What kafka-tools (--reset-offsets --to-offset) and kafkajs-admin (setOffsets) commit. */
const ADMIN_COMMIT_OFFSET = 1;

interface Candidate extends RecordedPair {
  broker: string;
  advertised: string;
  errorFree: boolean;
  interesting: boolean;
  decodes: boolean;
  problem?: string;
}

const log = (...args: unknown[]) => console.log(new Date().toISOString().slice(11, 19), ...args);

/** Every `errorCode` anywhere in a decoded body (top level, topics, partitions, groups, ...). */
export function errorCodes(v: unknown, out: number[] = []): number[] {
  if (v === null || typeof v !== 'object' || Buffer.isBuffer(v)) return out;
  if (Array.isArray(v)) {
    for (const e of v) errorCodes(e, out);
    return out;
  }
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
    if (k === 'errorCode' && typeof x === 'number') out.push(x);
    else errorCodes(x, out);
  }
  return out;
}

function hasRecords(v: unknown): boolean {
  if (v === null || typeof v !== 'object') return false;
  if (Buffer.isBuffer(v)) return false;
  if (Array.isArray(v)) return v.some(hasRecords);
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
    if (k === 'records' && Buffer.isBuffer(x) && x.length > 0) return true;
    if (hasRecords(x)) return true;
  }
  return false;
}

/** True if every offset the request commits is the topic's record count (a consumer's final commit). */
function commitsEverything(body: unknown, produced: Record<string, number>): boolean {
  const topics = (body as { topics: { name: string; partitions: { committedOffset: bigint }[] }[] }).topics;
  return topics.every((t) =>
    t.partitions.every((p) => produced[t.name] !== undefined && p.committedOffset === BigInt(produced[t.name]!)),
  );
}

function classify(
  pair: RecordedPair,
  broker: string,
  advertised: string,
  produced: Record<string, number>,
): Candidate {
  const c: Candidate = { ...pair, broker, advertised, errorFree: true, interesting: true, decodes: true };
  try {
    const request = decodeRequestFrame(pair.request);
    // OffsetCommit / TxnOffsetCommit: prefer the commit after the last record.
    if (pair.apiKey === ApiKey.OffsetCommit || pair.apiKey === ApiKey.TxnOffsetCommit)
      c.interesting = commitsEverything(request.body, produced);
    if (pair.response) {
      const { body } = decodeResponseFrame(pair.response, pair.apiKey, pair.apiVersion);
      c.errorFree = errorCodes(body).every((e) => e === 0);
      if (pair.apiKey === ApiKey.Fetch) c.interesting = hasRecords(body); // Fetch: one that carries records
    }
  } catch (e) {
    c.decodes = false;
    c.problem = String(e);
  }
  return c;
}

function better(a: Candidate, b: Candidate): boolean {
  const rank = (c: Candidate) => [
    c.decodes ? 0 : 1,
    (c.response?.length ?? 0) > MAX_RESPONSE ? 1 : 0,
    c.errorFree ? 0 : 1,
    c.interesting ? 0 : 1,
    c.request.length + (c.response?.length ?? 0),
  ];
  const ra = rank(a);
  const rb = rank(b);
  for (let i = 0; i < ra.length; i++) if (ra[i] !== rb[i]) return ra[i]! < rb[i]!;
  return false;
}

/** ConsumerGroupCommand --delete-offsets (OffsetDelete); the group must be empty. */
async function deleteOffsets(classpath: string, target: ClientTarget, group: string, topic: string) {
  const main = toolMainClass(classpath, 'consumerGroupCommand');
  const args = [...FAST_JVM_FLAGS, '-cp', classpath, main, '--bootstrap-server', target.bootstrap];
  args.push('--delete-offsets', '--group', group, '--topic', topic);
  assertSucceeded('delete-offsets', await runProgram('java', args, { timeoutMs: 90_000 }));
}

/** kcat -G straight (the bed's helper reads the committed offsets with kafkajs, another client). */
async function kcatConsume(target: ClientTarget, group: string, topic: string): Promise<void> {
  const args = ['-G', group, '-c', '1000', '-J', '-q', '-b', target.bootstrap];
  for (const x of [
    'auto.offset.reset=earliest',
    'session.timeout.ms=10000',
    'heartbeat.interval.ms=500',
    'fetch.wait.max.ms=100',
    'auto.commit.interval.ms=500',
  ])
    args.push('-X', x);
  args.push(topic);
  await runProgram(KCAT, args, { timeoutMs: 4_000 }); // ends by SIGTERM, on which kcat commits and leaves
}

async function kcatProduce(target: ClientTarget, topic: string, acks = 'all'): Promise<void> {
  let input = '';
  for (let i = 0; i < RECORDS; i++) input += `${recordKey(i)}\t${recordValue(i)}\n`;
  const args = ['-P', '-t', topic, '-K', '\t', '-X', `acks=${acks}`, '-X', 'linger.ms=5', '-b', target.bootstrap];
  assertSucceeded('kcat -P', await runProgram(KCAT, args, { input, timeoutMs: 60_000 }));
}

/** kafkajs admin calls that the consumer helpers do not make (DeleteGroups, DescribeGroups, ListGroups...). */
async function kafkajsAdmin(target: ClientTarget, group: string, topic: string): Promise<void> {
  const kafka = new Kafka({ clientId: 'golden-kafkajs-admin', brokers: [target.bootstrap], logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.describeCluster();
    await admin.describeGroups([group]);
    await admin.listGroups();
    await admin.fetchOffsets({ groupId: group, topics: [topic] });
    await admin.fetchTopicOffsets(topic);
    await admin.setOffsets({ groupId: group, topic, partitions: [{ partition: 0, offset: String(ADMIN_COMMIT_OFFSET) }] });
    await admin.deleteGroups([group]);
  } finally {
    await admin.disconnect();
  }
}

async function recordBroker(version: string, store: Map<string, Candidate>, problems: string[], produced: Record<string, number>) {
  let advertised = '';
  const relay = await startRelay((pair) => {
    const c = classify(pair, version, advertised, produced);
    if (!c.decodes) problems.push(`${version} ${pair.client} api ${pair.apiKey} v${pair.apiVersion}: ${c.problem}`);
    const key = `${c.client}|${version}|${c.apiKey}|${c.apiVersion}`;
    const old = store.get(key);
    if (!old || better(c, old)) store.set(key, c);
  });
  advertised = `${relay.host}:${relay.port}`;
  let cluster: KafkaCluster | undefined;
  try {
    log(`starting Kafka ${version}, relay at ${advertised}`);
    cluster = await startKafka({ version, advertisedPorts: { 1: relay.port } });
    const broker = cluster.brokers[0]!;
    relay.setUpstream(broker.host, broker.port);
    const target: ClientTarget = { bootstrap: advertised };
    const tag = version.replaceAll('.', '');
    const topic = (client: string) => `golden-${client}-${tag}`;
    const group = (client: string) => `golden-group-${client}-${tag}`;
    const four = version.startsWith('4.');
    const step = async (client: string, what: string, fn: () => Promise<unknown>) => {
      relay.setClient(client);
      log(`${version} ${client}: ${what}`);
      try {
        await fn();
      } catch (e) {
        problems.push(`${version} ${client} ${what}: ${String(e).slice(0, 500)}`);
        log(`  failed: ${String(e).slice(0, 300)}`);
      }
    };

    const clients = ['kafkajs', 'java-classic', 'kcat', 'python', ...(four ? ['java-consumer'] : [])];
    // Each producer writes RECORDS records to its topic (the transforms as many to theirs).
    for (const c of [...clients, 'kcat-acks0']) produced[topic(c)] = RECORDS;
    produced[`${topic('java-classic')}-out`] = RECORDS;
    if (four) produced[`${topic('java-consumer')}-out`] = RECORDS;
    await step('kafkajs', 'create topics', () =>
      createTopics(target, [
        ...clients.map((c) => ({ topic: topic(c) })),
        { topic: topic('kcat-acks0') },
        { topic: `${topic('java-classic')}-out` },
        ...(four ? [{ topic: `${topic('java-consumer')}-out` }] : []),
      ]),
    );

    // kafkajs
    await step('kafkajs', 'produce', () => kafkajsClient.produce(target, { topic: topic('kafkajs'), count: RECORDS }));
    // More than there is, with a short deadline: the consumer heartbeats while it waits.
    await step('kafkajs', 'consume', () =>
      kafkajsClient.consume(target, { topic: topic('kafkajs'), group: group('kafkajs'), max: 1000, timeoutMs: 2_500 }),
    );

    // Kafka's tools (Java admin client of the broker's version)
    await step('kafka-tools', 'describe group', () =>
      describeConsumerGroup(cluster!.classpath, target, group('kafkajs')),
    );
    await step('kafka-tools', 'reset offsets', () =>
      resetConsumerGroupOffsets(cluster!.classpath, target, { group: group('kafkajs'), topic: topic('kafkajs'), to: { offset: ADMIN_COMMIT_OFFSET } }),
    );
    await step('kafka-tools', 'delete offsets', () =>
      deleteOffsets(cluster!.classpath, target, group('kafkajs'), topic('kafkajs')),
    );
    await step('kafkajs-admin', 'admin', () => kafkajsAdmin(target, group('kafkajs'), topic('kafkajs')));

    // Java, classic group protocol, client of the broker's version
    const javaClassic = await javaClient(cluster.classpath, { protocol: 'classic' });
    await step('java-classic', 'produce', () => javaClassic.produce(target, { topic: topic('java-classic'), count: RECORDS }));
    await step('java-classic', 'consume', () =>
      javaClassic.consume(target, { topic: topic('java-classic'), group: group('java-classic'), max: 1000, timeoutMs: 2_500 }),
    );
    await step('java-classic', 'transform', () =>
      javaClassic.transform(target, {
        input: topic('java-classic'),
        output: `${topic('java-classic')}-out`,
        group: `${group('java-classic')}-tx`,
        transactionalId: `golden-tx-classic-${tag}`,
        max: RECORDS,
      }),
    );
    await step('java-classic', 'describe cluster', () => javaClassic.describeCluster(target));
    await step('java-classic', 'group offsets', () => javaClassic.groupOffsets(target, group('java-classic')));
    await step('java-classic', 'delete group', () => javaClassic.deleteGroup(target, group('java-classic')));

    if (four) {
      const javaConsumer = await javaClient(cluster.classpath, { protocol: 'consumer' });
      await step('java-consumer', 'produce', () =>
        javaConsumer.produce(target, { topic: topic('java-consumer'), count: RECORDS }),
      );
      await step('java-consumer', 'consume', () =>
        javaConsumer.consume(target, { topic: topic('java-consumer'), group: group('java-consumer'), max: 1000, timeoutMs: 2_500 }),
      );
      await step('java-consumer', 'transform', () =>
        javaConsumer.transform(target, {
          input: topic('java-consumer'),
          output: `${topic('java-consumer')}-out`,
          group: `${group('java-consumer')}-tx`,
          transactionalId: `golden-tx-consumer-${tag}`,
          max: RECORDS,
        }),
      );
    }

    // librdkafka
    await step('kcat', 'produce', () => kcatProduce(target, topic('kcat')));
    // acks=0: the broker answers nothing (a request without response); a label of its own, so
    // that kcat's acks=all pair is kept too.
    await step('kcat-acks0', 'produce acks=0', () => kcatProduce(target, topic('kcat-acks0'), '0'));
    await step('kcat', 'consume', () => kcatConsume(target, group('kcat'), topic('kcat')));
    await step('python', 'produce', () => pythonClient.produce(target, { topic: topic('python'), count: RECORDS }));
    await step('python', 'consume', () =>
      pythonClient.consume(target, { topic: topic('python'), group: group('python'), max: 1000, timeoutMs: 3_000 }),
    );
  } finally {
    problems.push(...relay.problems.map((p) => `${version} relay: ${p}`));
    await relay.close();
    await cluster?.stop();
  }
}

async function main(): Promise<void> {
  const requested = process.argv.slice(2);
  const versions = requested.length > 0 ? requested : [KAFKA_VERSION, KAFKA_COMPAT_VERSION];
  const store = new Map<string, Candidate>();
  const problems: string[] = [];
  const produced: Record<string, number> = {};
  for (const version of versions) await recordBroker(version, store, problems, produced);

  // Keep the entries of brokers not recorded this time.
  let previous: GoldenIndex | undefined;
  try {
    previous = JSON.parse(fs.readFileSync(INDEX_FILE, 'utf8')) as GoldenIndex;
  } catch {
    previous = undefined;
  }
  const kept = (previous?.entries ?? []).filter((e) => !versions.includes(e.broker));
  for (const version of versions) fs.rmSync(path.join(FRAMES_DIR, version), { recursive: true, force: true });

  const entries: GoldenEntry[] = [...kept];
  const sorted = [...store.values()].sort((a, b) =>
    a.broker !== b.broker
      ? a.broker < b.broker ? -1 : 1
      : a.client !== b.client
        ? a.client < b.client ? -1 : 1
        : a.apiKey - b.apiKey || a.apiVersion - b.apiVersion,
  );
  for (const c of sorted) {
    const api = getApiCodec(c.apiKey)?.name ?? `Api${c.apiKey}`;
    const dir = path.join(FRAMES_DIR, c.broker, c.client);
    fs.mkdirSync(dir, { recursive: true });
    const base = `${api}-v${c.apiVersion}`;
    fs.writeFileSync(path.join(dir, `${base}.request.bin`), c.request);
    if (c.response) fs.writeFileSync(path.join(dir, `${base}.response.bin`), c.response);
    entries.push({
      client: c.client,
      broker: c.broker,
      apiKey: c.apiKey,
      api,
      version: c.apiVersion,
      request: `${c.broker}/${c.client}/${base}.request.bin`,
      response: c.response ? `${c.broker}/${c.client}/${base}.response.bin` : null,
      advertised: c.advertised,
      errorFree: c.errorFree,
      ...(c.decodes ? {} : { decodeError: c.problem }),
    });
  }
  entries.sort((a, b) =>
    a.broker !== b.broker ? (a.broker < b.broker ? -1 : 1) : a.client !== b.client ? (a.client < b.client ? -1 : 1) : a.apiKey - b.apiKey || a.version - b.version,
  );
  const index: GoldenIndex = {
    recordedWith: 'npx tsx test/golden/record/record.ts',
    producedPerTopic: { ...(previous?.producedPerTopic ?? {}), ...produced },
    adminCommitOffset: ADMIN_COMMIT_OFFSET,
    entries,
  };
  fs.writeFileSync(INDEX_FILE, JSON.stringify(index, null, 2) + '\n');

  const apis = new Set(entries.map((e) => e.api));
  log(`${entries.length} pairs, ${apis.size} APIs: ${[...apis].sort().join(', ')}`);
  if (problems.length > 0) {
    log(`${problems.length} problem(s):`);
    for (const p of problems) console.log(`  ${p}`);
  }
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
