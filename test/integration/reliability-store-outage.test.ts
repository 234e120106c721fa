// Issue 40: a store outage never costs a consumer its membership. A librdkafka consumer
// (python confluent-kafka, session.timeout.ms 10 s) commits every 200 ms through the CLI proxy on
// the Redis store and on the ZooKeeper store while the store goes away for 30 s (Redis frozen with
// SIGSTOP; Redis SIGKILLed and restarted; ZooKeeper stopped and started). Its heartbeat answers
// queue behind its commits' on the one coordinator connection, so the proxy must answer the
// commits at once while the store is known to be down (proxy/offsets/store-circuit.ts). Asserted:
// the consumer keeps its one assignment (no revocation, no lost partitions, no session timeout),
// it commits again soon after the store is back, and the last acknowledged commit is what the
// store holds at the end. The figures (slowest failing commit, first commit after the return) are
// printed for docs/reliability.md; nothing here asserts a speed.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, inject, test } from 'vitest';
import { openStore } from '../../backends/open-store.js';
import { createTopics } from '../bed/clients/kafkajs.js';
import { PYTHON } from '../bed/clients/python.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { startRedis } from '../bed/redis.js';
import type { RedisServer } from '../bed/redis.js';
import { startZooKeeper } from '../bed/zookeeper.js';
import type { ZooKeeperServer } from '../bed/zookeeper.js';
import { ensureBuilt, spawnProxy } from '../harness/proxy.js';
import { sleep } from '../reliability/commit-checker.js';
import { until } from '../reliability/fault-helpers.js';

const brokerBootstrap = inject('kafkaBootstrap');
const CONSUMER = fileURLToPath(new URL('../bed/clients/outage_consumer.py', import.meta.url));
const OUTAGE_MS = 30_000;

type Line = Record<string, unknown> & { type: string; t: number };

interface Consumer {
  child: ChildProcess;
  lines: Line[];
  stderr(): string;
}

function startConsumer(bootstrap: string, topic: string, group: string): Consumer {
  const child = spawn(PYTHON, [CONSUMER, '--bootstrap', bootstrap, '--topic', topic, '--group', group], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const lines: Line[] = [];
  let rest = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => {
    rest += d.toString();
    const parts = rest.split('\n');
    rest = parts.pop()!;
    for (const p of parts) if (p.trim() !== '') lines.push(JSON.parse(p) as Line);
  });
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  return { child, lines, stderr: () => err.slice(-4000) };
}

const commits = (c: Consumer) => c.lines.filter((l) => l.type === 'commit');
const acked = (c: Consumer) => commits(c).filter((l) => l['ok'] === true);

interface Outage {
  name: string;
  /** The proxy's --store URL. */
  store: () => string;
  down(): Promise<void>;
  up(): Promise<void>;
}

let redis: RedisServer | undefined;
let zk: ZooKeeperServer | undefined;
afterAll(async () => {
  if (redis?.pid !== undefined) process.kill(redis.pid, 'SIGCONT');
  await redis?.kill();
  await zk?.stop();
});

async function runOutage(o: Outage): Promise<void> {
  await ensureBuilt();
  const topic = uniqueName('store-outage');
  const group = `${topic}-group`;
  await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 2 }]);
  const proxy = await spawnProxy(['--bootstrap-server', brokerBootstrap, '--store', o.store()]);
  const consumer = startConsumer(proxy.bootstrap, topic, group);
  const explain = () =>
    `consumer:\n${consumer.lines.map((l) => JSON.stringify(l)).join('\n')}\n${consumer.stderr()}\n` +
    `proxy:\n${proxy.output().slice(-6000)}`;
  try {
    await until(() => acked(consumer).length >= 10, `${o.name}: ten acknowledged commits`, 60_000).catch(
      (e: unknown) => {
        throw new Error(`${String(e)}\n${explain()}`);
      },
    );
    const downAt = consumer.lines.at(-1)!.t;
    await o.down();
    await sleep(OUTAGE_MS);
    const lastAckBefore = acked(consumer).at(-1)!;
    await o.up();
    const upAt = consumer.lines.at(-1)?.t ?? downAt;
    const ackedAtUp = acked(consumer).length;
    await until(
      () => acked(consumer).length >= ackedAtUp + 10,
      `${o.name}: ten commits acknowledged after the store is back`,
      60_000,
    ).catch((e: unknown) => {
      throw new Error(`${String(e)}\n${explain()}`);
    });
    consumer.child.stdin!.write('stop\n');
    await until(() => consumer.lines.some((l) => l.type === 'committed'), 'the read-back', 60_000);
    const lastAck = acked(consumer).at(-1)!;
    const during = commits(consumer).filter((l) => l.t > downAt && l.t <= upAt);
    const failed = during.filter((l) => l['ok'] !== true);
    const firstAckAfter = acked(consumer).find((l) => l.t > upAt)!;
    const backAfterMs = firstAckAfter.t - upAt;
    console.log(
      `[store-outage] ${o.name}: ${during.length} commits during the ${OUTAGE_MS / 1000} s outage, ` +
        `${failed.length} failed (codes ${JSON.stringify([...new Set(failed.map((l) => l['code']))])}), ` +
        `slowest failing commit ${Math.max(0, ...failed.map((l) => Number(l['ms'])))} ms, ` +
        `median ${failed.map((l) => Number(l['ms'])).sort((a, b) => a - b)[Math.floor(failed.length / 2)] ?? 0} ms; ` +
        `first commit acknowledged ${backAfterMs} ms after the store was back; ` +
        `assignments ${consumer.lines.filter((l) => l.type === 'assigned').length}`,
    );
    // Until the consumer was told to stop (closing revokes its partitions, as it should).
    const stopAt = consumer.lines.find((l) => l.type === 'member')!.t;
    const membership = consumer.lines.filter(
      (l) => ['assigned', 'revoked', 'lost'].includes(l.type) && l.t < stopAt,
    );
    // One assignment, never revoked nor lost: the member kept its membership through the outage.
    expect(
      membership.map((l) => l.type),
      explain(),
    ).toEqual(['assigned']);
    expect(
      consumer.lines.filter(
        (l) =>
          l.type === 'client-error' &&
          /session|UNKNOWN_MEMBER|ILLEGAL_GEN/i.test(String(l['message']) + String(l['code'])),
      ),
      explain(),
    ).toEqual([]);
    // The store was really away: commits failed while it was.
    expect(failed.length, explain()).toBeGreaterThan(0);
    // Nothing acknowledged was lost: the coordinator (the proxy) and the store itself hold the last
    // acknowledged commit, and it is not below what was acknowledged before the outage.
    const offsets = consumer.lines.find((l) => l.type === 'committed')!['offsets'] as Record<string, number>;
    expect(Object.values(offsets)).toEqual([lastAck['offset'], lastAck['offset']]);
    expect(Number(lastAck['offset'])).toBeGreaterThan(Number(lastAckBefore['offset']));
    await proxy.stop();
    const store = await openStore(o.store());
    try {
      const stored = await store.fetch(group, null);
      expect(stored.map((s) => s.offset)).toEqual([
        BigInt(Number(lastAck['offset'])),
        BigInt(Number(lastAck['offset'])),
      ]);
    } finally {
      await store.close();
    }
  } finally {
    consumer.child.kill('SIGKILL');
    await proxy.stop('SIGKILL');
  }
}

describe('a 30 s store outage under a committing librdkafka consumer costs it nothing', () => {
  test('Redis frozen (SIGSTOP) and resumed', { timeout: 240_000 }, async () => {
    redis = await startRedis({ appendfsync: 'always' });
    const r = redis;
    await runOutage({
      name: 'Redis SIGSTOP',
      store: () => r.url,
      down: async () => void process.kill(r.pid!, 'SIGSTOP'),
      up: async () => void process.kill(r.pid!, 'SIGCONT'),
    });
  });

  test('Redis killed (SIGKILL) and restarted', { timeout: 240_000 }, async () => {
    const r = redis ?? (redis = await startRedis({ appendfsync: 'always' }));
    await runOutage({
      name: 'Redis SIGKILL',
      store: () => r.url,
      down: () => r.kill(),
      up: () => r.start(),
    });
  });

  test('ZooKeeper stopped and started', { timeout: 240_000 }, async () => {
    zk = await startZooKeeper();
    const z = zk;
    await runOutage({
      name: 'ZooKeeper stop',
      store: () => z.url,
      down: () => z.stop(),
      up: () => z.start(),
    });
  });
});
