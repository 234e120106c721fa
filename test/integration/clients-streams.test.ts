// A Kafka Streams app through the proxy, as directly: a word count written with Kafka 4.4's own
// kafka-streams library, against the bed's 4.4.0 broker at its defaults (the streams rebalance
// protocol, KIP-1071, is on), run once directly and once through the proxy (embedded store,
// offset service on, default commit guard), each with its own application id, on the same text:
//
// - group.protocol=streams with at_least_once: offsets committed by streams-group members go to
//   the proxy's store, fenced as the broker fences them (docs/design.md "Streams groups"); before
//   that fence every commit was refused and the stream thread died at its first one;
// - group.protocol=streams with exactly_once_v2 (offsets in the transaction, at the broker);
// - group.protocol=classic with at_least_once.
//
// Each run's final counts (the last value of each word in its output topic) must equal the
// text's: the app processes everything once when nothing fails, so at_least_once is held to
// equality too (the run reports no dead stream thread, which would otherwise explain extra
// counts). Through the proxy no commit of the app may be refused, and the committed offsets of an
// at_least_once app are in the store, at the input's end.
//
// Then kafka-streams-groups (list, describe, reset, delete offsets, delete) on the stopped
// streams-protocol apps gives the same output through the proxy as directly.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { EmbeddedStore } from '../../backends/embedded-store.js';
import { javaClient, type JavaClient } from '../bed/clients/java.js';
import { streamsGroupToolSteps } from '../bed/clients/kafka-tools.js';
import {
  javaStreamsClient,
  type JavaStreamsClient,
  type ProcessingGuarantee,
  type StreamsProtocol,
  type WordCountResult,
} from '../bed/clients/java-streams.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import type { ClientTarget } from '../bed/clients/types.js';
import { commitCounts, startOffsetProxy, type OffsetProxy } from '../harness/offset-proxy.js';
import { wordCountText } from '../harness/word-count-text.js';

type Route = 'direct' | 'proxy';
const ROUTES: Route[] = ['direct', 'proxy'];
const PARTITIONS = 3;

const kafka4 = !(inject('kafkaVersion') ?? '').startsWith('3.');

describe.runIf(kafka4)('a Kafka Streams word count directly and through the proxy (Kafka 4.4)', () => {
  const brokerBootstrap = inject('kafkaBootstrap');
  const classpath = inject('kafkaClasspath');
  const input = wordCountText();
  let dir: string;
  let store: EmbeddedStore;
  let proxy: OffsetProxy;
  let java: JavaClient;
  let streams: JavaStreamsClient;
  const targets = {} as Record<Route, ClientTarget>;
  const { accepted, refused, metrics } = commitCounts();

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'kop-streams-'));
    store = new EmbeddedStore({ dataDir: dir });
    proxy = await startOffsetProxy(brokerBootstrap, store, [], metrics);
    targets.direct = { bootstrap: brokerBootstrap };
    targets.proxy = { bootstrap: proxy.bootstrap };
    [java, streams] = await Promise.all([javaClient(classpath), javaStreamsClient(classpath)]);
  }, 300_000);
  afterAll(async () => {
    await proxy?.stop();
    await store?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  interface Run {
    applicationId: string;
    input: string;
    result: WordCountResult;
    counts: Record<string, number>;
  }

  /** The text into a new topic, the app over it, and its output's final counts, all through `route`. */
  async function wordCount(
    route: Route,
    protocol: StreamsProtocol,
    guarantee: ProcessingGuarantee,
  ): Promise<Run> {
    const target = targets[route];
    const label = `${protocol}-${guarantee === 'at_least_once' ? 'alo' : 'eos'}-${route}`;
    const inputTopic = uniqueName(`wc-in-${label}`);
    const outputTopic = uniqueName(`wc-out-${label}`);
    const applicationId = uniqueName(`wc-${label}`);
    await java.createTopic(target, inputTopic, PARTITIONS);
    await java.createTopic(target, outputTopic, PARTITIONS);
    await streams.produceLines(target, inputTopic, input.lines);
    const result = await streams.wordCount(target, {
      applicationId,
      input: inputTopic,
      output: outputTopic,
      protocol,
      guarantee,
      minLines: input.lines.length,
      minWords: input.words,
    });
    return {
      applicationId,
      input: inputTopic,
      result,
      counts: await streams.readCounts(target, outputTopic),
    };
  }

  /** The streams/at_least_once runs, whose stopped apps the group tool's test then works on. */
  let stoppedApps: Record<Route, Run> | undefined;

  /** Input-topic offsets of the group in the proxy's store, summed over partitions. */
  async function storedInputOffsets(run: Run): Promise<number> {
    const offsets = await store.fetch(run.applicationId, null);
    return offsets.filter((o) => o.topic === run.input).reduce((sum, o) => sum + Number(o.offset), 0);
  }

  test.each([
    ['streams', 'at_least_once'],
    ['streams', 'exactly_once_v2'],
    ['classic', 'at_least_once'],
  ] as [StreamsProtocol, ProcessingGuarantee][])(
    'group.protocol=%s, %s: the same final counts through the proxy as directly',
    { timeout: 10 * 60_000 },
    async (protocol, guarantee) => {
      const [direct, viaProxy] = await Promise.all(ROUTES.map((r) => wordCount(r, protocol, guarantee)));
      const runs: Record<Route, Run> = { direct: direct!, proxy: viaProxy! };
      for (const route of ROUTES) {
        const { result, counts } = runs[route];
        // Nothing failed, so nothing was processed twice: exact counts for either guarantee.
        expect({ route, deaths: result.deaths, state: result.state, timedOut: result.timedOut }).toEqual({
          route,
          deaths: [],
          state: 'RUNNING',
          timedOut: false,
        });
        expect({ route, counts }).toEqual({ route, counts: input.counts });
        expect(result.lines, route).toBe(input.lines.length);
        expect(result.words, route).toBe(input.words);
      }
      if (protocol === 'streams' && guarantee === 'at_least_once') stoppedApps = runs;
      const app = runs.proxy.applicationId;
      expect(refused.get(app) ?? 0, 'commits of the app the proxy refused').toBe(0);
      if (guarantee === 'at_least_once') {
        // Its offsets are the store's (exactly_once_v2 commits them in its transactions, at the broker).
        expect(accepted.get(app) ?? 0).toBeGreaterThan(0);
        expect(await storedInputOffsets(runs.proxy)).toBe(input.lines.length);
      }
      console.info(
        `streams word count, group.protocol=${protocol}, ${guarantee}: ${input.lines.length} lines, ` +
          `${input.words} words, ${Object.keys(input.counts).length} distinct; final counts equal to ` +
          `the text's directly and through the proxy; partition offsets committed through the ` +
          `proxy ${accepted.get(app) ?? 0}, refused ${refused.get(app) ?? 0}`,
      );
    },
  );

  // kafka-streams-groups (StreamsGroupCommand), the tool an operator uses on streams groups, on the
  // stopped apps of the streams/at_least_once case: describing reads the group from the broker and
  // its offsets from the proxy's store; resetting, deleting offsets and deleting the group change
  // the store. Every answer must be the broker's.
  test('kafka-streams-groups answers the same through the proxy', { timeout: 5 * 60_000 }, async () => {
    if (!stoppedApps) throw new Error('needs the streams/at_least_once word count to have passed first');
    const apps = stoppedApps;
    const outputs = await Promise.all(
      ROUTES.map(async (route) => {
        const { applicationId, input: inputTopic } = apps[route];
        const run = await streamsGroupToolSteps(classpath, targets[route], applicationId, inputTopic);
        return { route, ...run };
      }),
    );
    const [direct, viaProxy] = outputs as [(typeof outputs)[0], (typeof outputs)[0]];
    expect(direct.listed).toBe(true);
    expect(direct.listedAfterDelete).toBe(false);
    // The answers are real ones: the committed offsets were at the input's end, then reset to 0.
    const offsets = (step: string): number[] =>
      [...step.matchAll(/^<app> <input> \d+ (\d+)$/gm)].map((m) => Number(m[1]));
    expect(offsets(direct.steps[4]!).reduce((a, b) => a + b, 0)).toBe(input.lines.length);
    expect(offsets(direct.steps[6]!)).toEqual([0, 0, 0]);
    expect({ ...viaProxy, route: 'direct' }).toEqual(direct);
    expect(await store.fetch(apps.proxy.applicationId, null)).toEqual([]);
  });
});
