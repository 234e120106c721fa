// Issue #7, a stalled broker: the bed's broker frozen with SIGSTOP for ~5 s while clients keep
// writing large Produce requests and Fetch requests through the CLI proxy (memory store). The
// proxy must stop reading those clients once the broker no longer takes their bytes (its
// upstream socket refuses writes, or --max-in-flight requests wait), so its memory does not grow
// with what the producers try to send; a client doing admin-style OffsetCommit + OffsetFetch round
// trips (answered from the store: the broker was asked whether its principal may, on every
// connection, and that verdict was cached before the stall; topic metadata comes from the cache)
// is answered throughout the stall; after SIGCONT every request is answered, in order, and no
// record is lost or written twice.
// Issue #20: every request the proxy sends on a client's behalf while the broker is frozen (an
// authorization probe on a new connection, an OffsetFetch fallback, a topic lookup, a member
// re-check, a mirrored commit) fails within --request-timeout-ms, and the client gets a Kafka error
// in time instead of no answer.
import { execFileSync } from 'node:child_process';
import { describe, expect, inject, test } from 'vitest';
import { decodeResponseFrame, encodeRequestFrame } from '../../protocol/frames.js';
import { ApiKey } from '../../protocol/messages/index.js';
import {
  defaultFetchPartition,
  defaultFetchRequest,
  defaultFetchTopic,
} from '../../protocol/messages/fetch-request.js';
import type { FetchResponse } from '../../protocol/messages/fetch-response.js';
import type { ProduceResponse } from '../../protocol/messages/produce-response.js';
import { createTopics } from '../bed/clients/kafkajs.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { ensureBuilt, spawnProxy } from '../harness/proxy.js';
import { RawClient, produceRequest } from '../harness/raw-client.js';
import { commitBody, commitOnce, fetchOnce, rssOf, sleep } from '../reliability/commit-checker.js';
import type { OffsetCommitResponse } from '../../protocol/messages/offset-commit-response.js';

const brokerBootstrap = inject('kafkaBootstrap');

/** The pid of the process listening on the bootstrap's port (the bed's broker). */
function pidOnPort(hostPort: string): number | undefined {
  const port = hostPort.split(',')[0]!.split(':').at(-1);
  const out = execFileSync('ss', ['-ltnpH', `sport = :${port}`], { encoding: 'utf8' });
  const m = /pid=(\d+)/.exec(out);
  return m ? Number(m[1]) : undefined;
}

const PRODUCERS = 4;
const PRODUCES_PER_CLIENT = 100; // of 512 KB: 200 MB the producers try to send during the stall
const VALUE_BYTES = 512 * 1024;
const FETCHERS = 2;
const FETCHES_PER_CLIENT = 50;
const STALL_MS = 5_000;
const GAP_MS = 15;

/** Correlation ids of `frames` and each body (decoded as `apiKey` v`version`). */
function decodeAll<T>(frames: Buffer[], apiKey: number, version: number): { id: number; body: T }[] {
  return frames.map((f) => {
    const { header, body } = decodeResponseFrame(f, apiKey, version);
    return { id: header.correlationId, body: body as T };
  });
}

function percentiles(times: number[]) {
  const s = [...times].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(s.length * q))]!;
  return { n: s.length, p50: at(0.5), p99: at(0.99), max: s[s.length - 1]! };
}

const fmt = (l: { p50: number; p99: number; max: number }) =>
  `${l.p50.toFixed(1)}/${l.p99.toFixed(1)}/${l.max.toFixed(1)}`;

// With an external broker (KOP_BOOTSTRAP) the broker may be shared: never freeze it.
describe.skipIf(process.env['KOP_BOOTSTRAP'] !== undefined)('the broker stalled (SIGSTOP) under load', () => {
  test("the proxy's RSS stays bounded, store-answered commits go on, nothing is lost", async () => {
    await ensureBuilt();
    const brokerPid = pidOnPort(brokerBootstrap);
    expect(brokerPid, `no process listening on ${brokerBootstrap}`).toBeDefined();
    const topic = uniqueName('stalled-broker');
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 1 }]);

    const proxy = await spawnProxy(['--bootstrap-server', brokerBootstrap, '--store', 'memory://']);
    const pid = proxy.child.pid!;
    const clients: RawClient[] = [];
    const connect = async () => {
      const c = await RawClient.connect(proxy.bootstrap);
      clients.push(c);
      return c;
    };
    const group = `${topic}-admin`;
    let committed = 0n;
    const admin = await connect();
    const roundTrip = async () => {
      const t0 = performance.now();
      committed++;
      try {
        expect(await commitOnce(admin, group, topic, 1, committed)).toEqual([0]);
        const fetched = await fetchOnce(admin, group, topic, 1);
        expect(fetched.errorCode).toBe(0);
        expect(fetched.offsets.get(0)).toBe(committed);
      } catch (err) {
        // Seen once at load average 21 (a commit unanswered for 10 s during the stall), not
        // reproduced since: what the proxy logged is the evidence for next time.
        console.log(
          `[faults] stalled broker: round trip ${committed} failed; the proxy's log:\n${proxy.output().slice(-8000)}`,
        );
        throw err;
      }
      return performance.now() - t0;
    };
    // Round trips paced GAP_MS apart (a steady admin client, not a flood: back-to-back commits
    // would make garbage of their own and blur what the stalled clients cost in RSS).
    const measure = async (n: number, untilMs = Infinity) => {
      const times: number[] = [];
      for (let i = 0; i < n && performance.now() < untilMs; i++) {
        times.push(await roundTrip());
        await sleep(GAP_MS);
      }
      return percentiles(times);
    };

    // One 512 KB Produce frame (v9, acks=1), its correlation id patched in place for each copy.
    const produceFrame = produceRequest(9, 0, topic, 1, 'x'.repeat(VALUE_BYTES));
    const produce = (correlationId: number) => {
      const f = Buffer.from(produceFrame);
      f.writeInt32BE(correlationId, 8);
      return f;
    };
    // Fetch v11 from offset 0, up to 1 MB: once the broker runs again, each can be answered with ~1 MB.
    const fetch = (correlationId: number) =>
      encodeRequestFrame(
        { apiKey: ApiKey.Fetch, apiVersion: 11, correlationId, clientId: 'stalled-broker' },
        {
          ...defaultFetchRequest(),
          maxWaitMs: 100,
          minBytes: 1,
          maxBytes: 1024 * 1024,
          topics: [
            {
              ...defaultFetchTopic(),
              topic,
              partitions: [{ ...defaultFetchPartition(), partitionMaxBytes: 1024 * 1024 }],
            },
          ],
        },
      );

    let sampler: NodeJS.Timeout | undefined;
    try {
      // Before the stall: every producer and fetcher gets one answer, so the path to the broker
      // is open (the proxy's upstream connections exist) when the broker freezes.
      const producers: RawClient[] = [];
      for (let i = 0; i < PRODUCERS; i++) {
        const c = await connect();
        c.write(produce(1));
        producers.push(c);
      }
      const fetchers: RawClient[] = [];
      for (let i = 0; i < FETCHERS; i++) {
        const c = await connect();
        c.write(fetch(1));
        fetchers.push(c);
      }
      for (const c of producers) {
        const [r] = decodeAll<ProduceResponse>(await c.read(1), ApiKey.Produce, 9);
        expect(r!.body.responses[0]!.partitionResponses[0]!.errorCode).toBe(0);
      }
      for (const c of fetchers) {
        const [r] = decodeAll<FetchResponse>(await c.read(1), ApiKey.Fetch, 11);
        expect(r!.body.errorCode).toBe(0);
      }

      await measure(20); // warm-up
      const before = await measure(200);
      const rssBefore = rssOf(pid);

      process.kill(brokerPid!, 'SIGSTOP');
      const stallStart = performance.now();
      // Half the producers and all fetchers do not read during the stall; all write everything
      // now. Without backpressure the proxy would read the 200 MB of Produce requests into its
      // heap (the broker takes only a few MB into its socket buffers): with socket.pause() made a
      // no-op in the proxy process (NODE_OPTIONS=--import of a preload) this test saw +222 and
      // +264 MB and failed; with it, +30 to +36 MB, flat.
      producers.forEach((c, i) => {
        if (i % 2 === 1) c.socket.pause();
        for (let k = 0; k < PRODUCES_PER_CLIENT; k++) c.write(produce(k + 2));
      });
      for (const c of fetchers) {
        c.socket.pause();
        c.write(Buffer.concat(Array.from({ length: FETCHES_PER_CLIENT }, (_, k) => fetch(k + 2))));
      }
      const rss: number[] = [];
      sampler = setInterval(() => rss.push(rssOf(pid)), 250);
      await sleep(500);
      const during = await measure(Infinity, stallStart + STALL_MS - 300);
      await sleep(Math.max(0, stallStart + STALL_MS - performance.now()));
      clearInterval(sampler);
      rss.push(rssOf(pid));
      process.kill(brokerPid!, 'SIGCONT');
      const stallMs = performance.now() - stallStart;

      // After SIGCONT: every request answered, in order, nothing lost.
      const tResume = performance.now();
      for (const c of [...producers, ...fetchers]) c.socket.resume();
      const baseOffsets: bigint[] = [];
      for (const c of producers) {
        const answers = decodeAll<ProduceResponse>(
          await c.read(PRODUCES_PER_CLIENT, 30_000),
          ApiKey.Produce,
          9,
        );
        expect(answers.map((a) => a.id)).toEqual(
          Array.from({ length: PRODUCES_PER_CLIENT }, (_, k) => k + 2),
        );
        for (const a of answers) {
          const p = a.body.responses[0]!.partitionResponses[0]!;
          expect(p.errorCode).toBe(0);
          baseOffsets.push(p.baseOffset);
        }
      }
      for (const c of fetchers) {
        const answers = decodeAll<FetchResponse>(await c.read(FETCHES_PER_CLIENT, 30_000), ApiKey.Fetch, 11);
        expect(answers.map((a) => a.id)).toEqual(Array.from({ length: FETCHES_PER_CLIENT }, (_, k) => k + 2));
        for (const a of answers) expect(a.body.errorCode).toBe(0);
      }
      const drainMs = performance.now() - tResume;
      // One record per Produce, one partition: the first PRODUCERS records before the stall, then
      // every offset after them exactly once (none lost, none written twice).
      baseOffsets.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      expect(baseOffsets).toEqual(
        Array.from({ length: PRODUCERS * PRODUCES_PER_CLIENT }, (_, k) => BigInt(PRODUCERS + k)),
      );
      const after = await measure(50);

      const mb = (n: number) => (n / 1024 / 1024).toFixed(0);
      const growth = Math.max(...rss) - rssBefore;
      console.log(
        `[faults] stalled broker: SIGSTOP ${(stallMs / 1000).toFixed(1)} s while ${PRODUCERS} clients wrote ` +
          `${PRODUCERS * PRODUCES_PER_CLIENT} x 512 KB Produce (acks=1, ${(PRODUCERS * PRODUCES_PER_CLIENT) / 2} MB) and ` +
          `${FETCHERS} clients ${FETCHERS * FETCHES_PER_CLIENT} Fetch unread; proxy VmRSS ${mb(rssBefore)} MB before, ` +
          `max ${mb(Math.max(...rss))} MB during (samples ${rss.map(mb).join(' ')}); admin OffsetCommit+OffsetFetch ` +
          `p50/p99/max ${fmt(before)} ms before (n=${before.n}), ${fmt(during)} ms during (n=${during.n}), ` +
          `${fmt(after)} ms after; all ${PRODUCERS * PRODUCES_PER_CLIENT + FETCHERS * FETCHES_PER_CLIENT} ` +
          `requests answered in order ${(drainMs / 1000).toFixed(1)} s after SIGCONT`,
      );
      // Backpressure: memory does not follow the 200 MB the producers tried to send.
      expect(growth).toBeLessThan(64 * 1024 * 1024);
      // Store-answered round trips go on during the stall: each of them was answered while the
      // broker was still stopped (SIGCONT comes after the last; one held behind the stall would
      // have failed its 10 s read). How fast they were is logged above, not asserted: speed
      // belongs to the benchmarks, and this machine may be loaded.
      expect(during.n).toBeGreaterThanOrEqual(10);
      expect(proxy.child.exitCode).toBe(null);
    } finally {
      // A failure mid-stall must not leave the sampler reading a killed proxy's /proc entry.
      clearInterval(sampler);
      // The broker is shared with the test files that follow: never leave it stopped.
      // (SIGCONT to a running process does nothing, so it is sent whatever happened.)
      if (brokerPid !== undefined) process.kill(brokerPid, 'SIGCONT');
      for (const c of clients) c.close();
      await proxy.stop('SIGKILL');
    }
  });

  test("requests the proxy sends on a client's behalf fail within --request-timeout-ms", async () => {
    await ensureBuilt();
    const brokerPid = pidOnPort(brokerBootstrap);
    expect(brokerPid, `no process listening on ${brokerBootstrap}`).toBeDefined();
    const topic = uniqueName('stalled-deadline');
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 1 }]);
    const timeoutMs = 1_000;
    const proxy = await spawnProxy([
      '--bootstrap-server',
      brokerBootstrap,
      '--store',
      'memory://',
      '--request-timeout-ms',
      String(timeoutMs),
      '--fallback',
      'upstream',
      '--mirror-commits',
      'true',
      '--unknown-topics',
      'reject',
    ]);
    const clients: RawClient[] = [];
    const connect = async () => {
      const c = await RawClient.connect(proxy.bootstrap);
      clients.push(c);
      return c;
    };
    const group = (name: string) => `${topic}-${name}`;
    try {
      // Before the stall, on each connection, what makes the broker's verdict on its principal
      // cached there (so only the request under test needs the broker during the stall).
      const fallback = await connect();
      expect((await fetchOnce(fallback, group('fallback'), topic, 1)).errorCode).toBe(0);
      // A topic the cluster does not have: refused, and the metadata the proxy caches lacks it.
      const unknownTopic = `${topic}-none`;
      const lookup = await connect();
      expect(await commitOnce(lookup, group('lookup'), unknownTopic, 1, 1n)).toEqual([3]);
      const member = await connect();
      expect(await commitOnce(member, group('member'), topic, 1, 1n)).toEqual([0]);
      const mirror = await connect();
      expect(await commitOnce(mirror, group('mirror'), topic, 1, 1n)).toEqual([0]);
      await sleep(500); // the mirrored copies of those commits are done

      const timed = async <T>(what: string, work: () => Promise<T>) => {
        const t0 = performance.now();
        const value = await work();
        return { what, ms: performance.now() - t0, value };
      };
      const commitCodes = (r: OffsetCommitResponse) =>
        r.topics.flatMap((t) => t.partitions.map((p) => p.errorCode));
      process.kill(brokerPid!, 'SIGSTOP');
      const stallStart = performance.now();
      let results: { what: string; ms: number; value: number[] }[];
      try {
        results = await Promise.all([
          // A new connection: nothing is cached, the authorization probe goes to the frozen broker.
          timed('authorization probe (new connection)', async () => {
            const fresh = await connect();
            return commitOnce(fresh, group('lookup'), topic, 1, 2n);
          }),
          // A group the store has never seen: --fallback upstream asks its coordinator.
          timed('OffsetFetch fallback', async () => [
            (await fetchOnce(fallback, group('fallback'), topic, 1)).errorCode,
          ]),
          // A topic not in the cached metadata: --unknown-topics reject looks again.
          timed('topic lookup', () => commitOnce(lookup, group('lookup'), unknownTopic, 1, 2n)),
          // A member the store does not know: the broker is asked whether it is current.
          timed('member re-check', async () => {
            const body = {
              ...(commitBody(group('member'), topic, 1, 2n) as object),
              generationIdOrMemberEpoch: 5,
              memberId: 'm-1',
            };
            return commitCodes(await member.request<OffsetCommitResponse>(ApiKey.OffsetCommit, 8, 902, body));
          }),
          // Accepted from the store; its copy to the broker fails in the background.
          timed('commit mirrored to the broker', async () =>
            commitOnce(mirror, group('mirror'), topic, 1, 2n),
          ),
        ]);
        // The mirrored copy's failure is logged within the deadline too.
        for (let i = 0; i < 60 && !proxy.output().includes('mirrored commit failed'); i++) await sleep(50);
      } finally {
        process.kill(brokerPid!, 'SIGCONT');
      }
      const stallMs = performance.now() - stallStart;
      console.log(
        `[faults] frozen broker, --request-timeout-ms ${timeoutMs}: ` +
          results
            .map((r) => `${r.what} answered in ${r.ms.toFixed(0)} ms with ${r.value.join(',')}`)
            .join('; ') +
          `; mirrored commit failure logged: ${proxy.output().includes('mirrored commit failed')}; stall ${(stallMs / 1000).toFixed(1)} s`,
      );
      // Each within a generous bound, well before the broker ran again (the stall lasts > 5 s).
      for (const r of results) expect(r.ms, r.what).toBeLessThan(4 * timeoutMs);
      const byWhat = new Map(results.map((r) => [r.what, r.value]));
      // Probe and fallback failed: COORDINATOR_NOT_AVAILABLE, which clients retry.
      expect(byWhat.get('authorization probe (new connection)')).toEqual([15]);
      expect(byWhat.get('OffsetFetch fallback')).toEqual([15]);
      // The store refuses the unknown member, and the broker cannot confirm it: not the store's
      // UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION (fatal to a live member) but a retriable code.
      expect(byWhat.get('member re-check')).toEqual([15]);
      // The mirrored commit is acknowledged from the store whatever the broker does.
      expect(byWhat.get('commit mirrored to the broker')).toEqual([0]);
      expect(proxy.output()).toContain('mirrored commit failed');
      expect(proxy.child.exitCode).toBe(null);

      // After SIGCONT the broker answers again: a new connection commits.
      const after = await connect();
      let codes: number[] = [];
      for (let i = 0; i < 50; i++) {
        codes = await commitOnce(after, group('lookup'), topic, 1, 5n);
        if (codes[0] === 0) break;
        await sleep(200);
      }
      expect(codes).toEqual([0]);
    } finally {
      if (brokerPid !== undefined) process.kill(brokerPid, 'SIGCONT');
      for (const c of clients) c.close();
      await proxy.stop('SIGKILL');
    }
  });
});
