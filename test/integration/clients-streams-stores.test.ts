// A Kafka Streams app through the proxy on the Redis and ZooKeeper stores, as directly: the word
// count of clients-streams.test.ts (Kafka 4.4's kafka-streams, group.protocol=streams), now two
// instances in one group, one of them SIGKILLed mid-stream and restarted on its state directory.
// The same sequence runs directly and through the proxy at the same time, each with its own
// application id, on the same text:
//
//   instances A and B start, both RUNNING; the first half of the text is produced; A SIGKILLs
//   itself after processing 400 records (no commit, no leave: its member stays in the group until
//   the group's session timeout, 10 s); A is restarted on its state directory; the second half is
//   produced; once the output holds every count, both instances close cleanly.
//
// Through the proxy the store is real: redis-server with two proxy instances sharing it (A on one,
// B and the restarted A on the other, so the instance that saw A's member die is not the one its
// successor commits through), or ZooKeeper with one proxy. Final counts: exactly the text's for
// exactly_once_v2; for at_least_once every word present and none counted less than the text's
// (what A processed and did not commit is processed again), and the group's input offsets in the
// store at the input's end. Each run must end with no dead stream thread.
//
// The matrix is kept to three sequences (a minute or two each, mostly JVM starts): at_least_once on both stores, since its offsets are the store's and its
// commits go through the proxy's fence for streams groups; exactly_once_v2 once, on the two Redis
// instances, since its offsets go to the broker in the transaction (TxnOffsetCommit) and the store
// only marks the group transactional, which the restarted instance's OffsetFetch then reads from
// the broker through the other proxy instance. The classic protocol and single instances are
// clients-streams.test.ts's (embedded store).
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { openStore } from '../../backends/open-store.js';
import type { OffsetStore } from '../../backends/store.js';
import { javaClient, type JavaClient } from '../bed/clients/java.js';
import {
  javaStreamsClient,
  type JavaStreamsClient,
  type ProcessingGuarantee,
  type StreamsInstance,
  type WordCountResult,
} from '../bed/clients/java-streams.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import type { ClientTarget } from '../bed/clients/types.js';
import { commitCounts, startOffsetProxy, type OffsetProxy } from '../harness/offset-proxy.js';
import { wordCountText } from '../harness/word-count-text.js';
import { until } from '../reliability/fault-helpers.js';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const kafka4 = !(inject('kafkaVersion') ?? '').startsWith('3.');
const PARTITIONS = 3;
/** A's records (input lines plus words) before it kills itself: well inside the first half. */
const SIGKILL_AFTER = 400;
/**
 * The group's streams.session.timeout.ms: the killed instance's tasks wait this long for another
 * (the broker's default, 45 s, would be most of each run).
 */
const SESSION_TIMEOUT_MS = 10_000;

type StoreName = 'redis×2' | 'zookeeper';

/** Where each instance connects: A, B, and A once restarted. */
interface Placement {
  a: ClientTarget;
  b: ClientTarget;
  restarted: ClientTarget;
}

interface SequenceResult {
  applicationId: string;
  input: string;
  counts: Record<string, number>;
  killedAfter: number;
  survivor: WordCountResult;
  restarted: WordCountResult;
}

describe.runIf(kafka4)(
  'a Kafka Streams app, two instances, one SIGKILLed: Redis and ZooKeeper stores',
  () => {
    const brokerBootstrap = inject('kafkaBootstrap');
    const classpath = inject('kafkaClasspath');
    const text = wordCountText();
    const half = text.lines.length / 2;
    const stores: OffsetStore[] = [];
    const proxies: OffsetProxy[] = [];
    const instances: StreamsInstance[] = [];
    const scratch: string[] = [];
    let java: JavaClient;
    let streams: JavaStreamsClient;
    const placements = {} as Record<StoreName | 'direct', Placement>;
    const storeOf = {} as Record<StoreName, OffsetStore>;
    const { accepted, refused, metrics } = commitCounts();

    beforeAll(async () => {
      const proxyOn = async (store: OffsetStore): Promise<ClientTarget> => {
        stores.push(store);
        const proxy = await startOffsetProxy(brokerBootstrap, store, [], metrics);
        proxies.push(proxy);
        return { bootstrap: proxy.bootstrap };
      };
      const [redis1, redis2, zookeeper] = await Promise.all([
        openStore(inject('redisUrl')),
        openStore(inject('redisUrl')),
        openStore(`zk://${inject('zkConnect')}`),
      ]);
      const [r1, r2, zk] = [await proxyOn(redis1), await proxyOn(redis2), await proxyOn(zookeeper)];
      const direct = { bootstrap: brokerBootstrap };
      placements.direct = { a: direct, b: direct, restarted: direct };
      placements['redis×2'] = { a: r1, b: r2, restarted: r2 };
      placements.zookeeper = { a: zk, b: zk, restarted: zk };
      storeOf['redis×2'] = redis1;
      storeOf.zookeeper = zookeeper;
      [java, streams] = await Promise.all([javaClient(classpath), javaStreamsClient(classpath)]);
    }, 300_000);
    afterAll(async () => {
      for (const instance of instances) instance.kill();
      await Promise.allSettled(proxies.map((p) => p.stop()));
      await Promise.allSettled(stores.map((s) => s.close()));
      for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
    });

    /** Every word present, none counted less than the text's (and exactly so for `exact`). */
    function complete(counts: Record<string, number>, exact: boolean): boolean {
      const words = Object.keys(text.counts);
      if (Object.keys(counts).length !== words.length) return false;
      return words.every((w) => (exact ? counts[w] === text.counts[w] : (counts[w] ?? 0) >= text.counts[w]!));
    }

    async function sequence(
      route: StoreName | 'direct',
      label: string,
      guarantee: ProcessingGuarantee,
    ): Promise<SequenceResult> {
      const place = placements[route];
      const inputTopic = uniqueName(`wc2-in-${label}`);
      const outputTopic = uniqueName(`wc2-out-${label}`);
      const applicationId = uniqueName(`wc2-${label}`);
      await java.createTopic(place.a, inputTopic, PARTITIONS);
      await java.createTopic(place.a, outputTopic, PARTITIONS);
      const stateDirA = mkdtempSync(path.join(os.tmpdir(), 'kop-streams-a-'));
      const stateDirB = mkdtempSync(path.join(os.tmpdir(), 'kop-streams-b-'));
      scratch.push(stateDirA, stateDirB);
      const app = {
        applicationId,
        input: inputTopic,
        output: outputTopic,
        protocol: 'streams' as const,
        guarantee,
      };
      const start = async (
        target: ClientTarget,
        stateDir: string,
        sigkillAfter?: number,
        sessionTimeoutMs?: number,
      ) => {
        const instance = await streams.startInstance(target, {
          ...app,
          stateDir,
          sigkillAfter,
          sessionTimeoutMs,
        });
        instances.push(instance);
        return instance;
      };
      const running = (instance: StreamsInstance, what: string) =>
        until(() => instance.state() === 'RUNNING', `${label}: ${what} RUNNING`, 180_000).catch(
          (e: unknown) => {
            throw new Error(`${String(e)}\n${instance.explain()}`);
          },
        );

      const a = await start(place.a, stateDirA, SIGKILL_AFTER, SESSION_TIMEOUT_MS);
      const b = await start(place.b, stateDirB);
      await Promise.all([running(a, 'A'), running(b, 'B')]);
      await streams.produceLines(place.a, inputTopic, text.lines.slice(0, half));
      const killed = await Promise.race([
        a.exited,
        sleep(240_000).then(() => ({ code: null, signal: null, timedOut: true })),
      ]);
      const sigkill = a.lines.find((l) => l['type'] === 'sigkill');
      if (killed.signal !== 'SIGKILL' || !sigkill)
        throw new Error(`${label}: A was not SIGKILLed\n${a.explain()}`);

      const restarted = await start(place.restarted, stateDirA);
      await streams.produceLines(place.a, inputTopic, text.lines.slice(half));
      await running(restarted, 'A restarted');
      // Done when the output holds every count (A's tasks move on only after its session timeout).
      const exact = guarantee === 'exactly_once_v2';
      let counts: Record<string, number> = {};
      for (const deadline = Date.now() + 300_000; Date.now() < deadline; await sleep(2000)) {
        counts = await streams.readCounts(place.a, outputTopic);
        if (complete(counts, exact)) break;
      }
      // A rebalance may still be settling (the dead member's tasks given out): closed once it has.
      await Promise.all([running(b, 'B at the end'), running(restarted, 'A restarted at the end')]);
      const [survivor, restartedResult] = await Promise.all([b.stop(), restarted.stop()]);
      return {
        applicationId,
        input: inputTopic,
        counts: await streams.readCounts(place.a, outputTopic),
        killedAfter: Number(sigkill['processed']),
        survivor,
        restarted: restartedResult,
      };
    }

    test.each([
      ['redis×2', 'at_least_once'],
      ['redis×2', 'exactly_once_v2'],
      ['zookeeper', 'at_least_once'],
    ] as [StoreName, ProcessingGuarantee][])(
      '%s, %s: the same final counts through the proxy as directly',
      { timeout: 15 * 60_000 },
      async (storeName, guarantee) => {
        const short = guarantee === 'at_least_once' ? 'alo' : 'eos';
        const label = `${storeName === 'redis×2' ? 'redis' : 'zk'}-${short}`;
        const [direct, viaProxy] = await Promise.all([
          sequence('direct', `${label}-direct`, guarantee),
          sequence(storeName, `${label}-proxy`, guarantee),
        ]);
        const runs = { direct: direct!, proxy: viaProxy! };
        const exact = guarantee === 'exactly_once_v2';
        const extra: Record<string, number> = {};
        for (const [route, run] of Object.entries(runs)) {
          expect({ route, killedAfter: run.killedAfter }).toEqual({ route, killedAfter: SIGKILL_AFTER });
          for (const result of [run.survivor, run.restarted])
            expect({ route, deaths: result.deaths, state: result.state, timedOut: result.timedOut }).toEqual({
              route,
              deaths: [],
              state: 'RUNNING',
              timedOut: false,
            });
          // Both instances took part, B all along and the restarted A once its predecessor's tasks
          // were free.
          expect(run.survivor.lines + run.survivor.words, `${route}: B processed records`).toBeGreaterThan(0);
          if (exact) expect({ route, counts: run.counts }).toEqual({ route, counts: text.counts });
          else
            expect({ route, complete: complete(run.counts, false), counts: run.counts }).toMatchObject({
              route,
              complete: true,
            });
          extra[route] = Object.entries(run.counts).reduce(
            (sum, [w, n]) => sum + n - (text.counts[w] ?? 0),
            0,
          );
        }
        const app = viaProxy!.applicationId;
        if (!exact) {
          // The app's offsets are the store's, at the input's end after the clean close.
          expect(accepted.get(app) ?? 0).toBeGreaterThan(0);
          const stored = await storeOf[storeName].fetch(app, null);
          const total = stored
            .filter((o) => o.topic === viaProxy!.input)
            .reduce((s, o) => s + Number(o.offset), 0);
          expect(total).toBe(text.lines.length);
        }
        console.info(
          `streams, two instances, one SIGKILLed after ${SIGKILL_AFTER} records, ${storeName}, ` +
            `${guarantee}: ${text.lines.length} lines, ${text.words} words; final counts complete ` +
            `directly and through the proxy; counted twice: directly ${extra['direct']}, through the ` +
            `proxy ${extra['proxy']}; partition offsets committed through the proxy ` +
            `${accepted.get(app) ?? 0}, refused ${refused.get(app) ?? 0}`,
        );
      },
    );
  },
);
