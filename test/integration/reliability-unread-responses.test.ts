// Issue #20, clients that do not read, through the CLI proxy (a child process: its RSS is its own)
// in front of the bed's broker:
// - connections that pipeline OffsetFetch requests the proxy answers itself (a group with large
//   metadata, ~2 MB an answer) and never read: the proxy stops reading them, as a broker does, so
//   its memory does not follow what they asked for, and a normal client keeps being answered;
// - idle and slowloris connections (nothing sent, or a request that never ends) hold no broker
//   connection: the proxy opens one when a client first needs the broker.
import { execFileSync } from 'node:child_process';
import { beforeAll, describe, expect, inject, test } from 'vitest';
import { decodeResponseFrame, encodeRequestFrame } from '../../protocol/frames.js';
import { ApiKey } from '../../protocol/messages/index.js';
import type { MetadataResponse } from '../../protocol/messages/metadata-response.js';
import type { OffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';
import type { OffsetCommitResponse } from '../../protocol/messages/offset-commit-response.js';
import { defaultOffsetFetchRequest } from '../../protocol/messages/offset-fetch-request.js';
import type { OffsetFetchResponse } from '../../protocol/messages/offset-fetch-response.js';
import { createTopics } from '../bed/clients/kafkajs.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { ensureBuilt } from '../harness/proxy.js';
import { RawClient, apiVersionsRequest, metadataRequestBody } from '../harness/raw-client.js';
import { commitBody, commitOnce, fetchOnce, rssOf, sleep } from '../reliability/commit-checker.js';
import { until } from '../reliability/fault-helpers.js';
import {
  MiB,
  cliWithMetrics,
  closeProbes,
  fmt,
  latencies,
  mb,
  openProbes,
  scrape,
  tally,
} from '../reliability/limits-helpers.js';
import type { Probe } from '../reliability/limits-helpers.js';

const brokerBootstrap = inject('kafkaBootstrap');
const env = (name: string, fallback: number): number => Number(process.env[name] ?? fallback);

beforeAll(async () => {
  await ensureBuilt();
});

/** The CLI with the memory store, its HTTP endpoint (metrics) on a free port, lag off. */
const cli = (args: string[] = []) => cliWithMetrics(brokerBootstrap, args);

const PARTITIONS = 500;
const METADATA = 'm'.repeat(4000); // under offset.metadata.max.bytes (4096)

/** Commits PARTITIONS partitions of `topic` with METADATA each: the group's OffsetFetch answer is ~2 MB. */
async function commitLargeGroup(client: RawClient, group: string, topic: string): Promise<void> {
  const body = commitBody(group, topic, PARTITIONS, 0n) as OffsetCommitRequest;
  for (const p of body.topics[0]!.partitions) {
    p.committedOffset = BigInt(p.partitionIndex);
    p.committedMetadata = METADATA;
  }
  const r = await client.request<OffsetCommitResponse>(ApiKey.OffsetCommit, 8, 1, body);
  expect(r.topics.flatMap((t) => t.partitions.map((p) => p.errorCode))).toEqual(
    Array.from({ length: PARTITIONS }, () => 0),
  );
}

/** OffsetFetch v8 of every partition of `group` (topics null). */
const fetchAll = (group: string, correlationId: number): Buffer =>
  encodeRequestFrame(
    { apiKey: ApiKey.OffsetFetch, apiVersion: 8, correlationId, clientId: 'unread' },
    {
      ...defaultOffsetFetchRequest(),
      groups: [{ groupId: group, memberId: null, memberEpoch: -1, topics: null }],
    },
  );

describe('clients that do not read their answers', () => {
  test('pipelined locally answered OffsetFetch: the proxy stops reading them, its RSS stays bounded, others are served', async () => {
    const readers = env('KOP_UNREAD_CLIENTS', 2);
    const perClient = env('KOP_UNREAD_REQUESTS', 150);
    const topic = uniqueName('unread');
    // Every committed partition exists: the proxy refuses commits to partitions the cluster lacks.
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: PARTITIONS }]);
    const { proxy, http } = await cli();
    const pid = proxy.child.pid!;
    const big = `${topic}-big`;
    const setup = await RawClient.connect(proxy.bootstrap);
    await commitLargeGroup(setup, big, topic);
    const one = await setup.request<OffsetFetchResponse>(ApiKey.OffsetFetch, 8, 2, {
      ...defaultOffsetFetchRequest(),
      groups: [{ groupId: big, memberId: null, memberEpoch: -1, topics: null }],
    });
    expect(one.groups[0]!.topics[0]!.partitions).toHaveLength(PARTITIONS);
    const answerBytes = fetchAll(big, 1).length + PARTITIONS * (METADATA.length + 30);
    setup.close();

    // A normal client: an OffsetCommit and OffsetFetch of its own group (answered from the store)
    // and a Metadata (answered by the broker) per round trip, paced.
    const normal = await RawClient.connect(proxy.bootstrap);
    const group = `${topic}-normal`;
    let committed = 0n;
    let correlation = 100;
    const roundTrip = async (): Promise<number> => {
      const t0 = performance.now();
      committed++;
      expect(await commitOnce(normal, group, topic, 1, committed)).toEqual([0]);
      const fetched = await fetchOnce(normal, group, topic, 1);
      expect(fetched.errorCode).toBe(0);
      expect(fetched.offsets.get(0)).toBe(committed);
      const md = await normal.request<MetadataResponse>(
        ApiKey.Metadata,
        12,
        correlation++,
        metadataRequestBody(),
      );
      expect(md.brokers.length).toBeGreaterThan(0);
      return performance.now() - t0;
    };
    const measure = async (n: number, untilMs = Infinity): Promise<number[]> => {
      const times: number[] = [];
      for (let i = 0; i < n && performance.now() < untilMs; i++) {
        times.push(await roundTrip());
        await sleep(15);
      }
      return times;
    };

    const stallers: RawClient[] = [];
    // Over this the run stops at once (the test then fails): without the bound the proxy would
    // answer every request into the socket buffers of clients that never read them.
    const rssBound = 128 * MiB;
    try {
      await measure(20);
      const before = await measure(100);
      const rssBefore = rssOf(pid);

      for (let i = 0; i < readers; i++) {
        const c = await RawClient.connect(proxy.bootstrap);
        c.socket.pause();
        c.write(Buffer.concat(Array.from({ length: perClient }, (_, k) => fetchAll(big, k + 1))));
        stallers.push(c);
      }
      const rss: number[] = [];
      const buffered: number[] = [];
      let exceeded = false;
      const sampler = setInterval(() => {
        const now = rssOf(pid);
        rss.push(now);
        if (now - rssBefore > rssBound && !exceeded) {
          exceeded = true;
          for (const c of stallers) c.close();
        }
      }, 200);
      const stallStart = performance.now();
      let during: number[];
      try {
        await sleep(500);
        during = await measure(Infinity, stallStart + 6_000);
        buffered.push((await scrape(http, 'kop_response_buffer_bytes'))!);
      } finally {
        clearInterval(sampler);
      }
      rss.push(rssOf(pid));
      const growth = Math.max(...rss) - rssBefore;

      // Nothing is lost: once they read, every answer comes, in order, whole.
      const tRead = performance.now();
      if (!exceeded) for (const c of stallers) c.socket.resume();
      let answered = 0;
      if (!exceeded) {
        for (const c of stallers) {
          const frames = await c.read(perClient, 120_000);
          const ids = frames.map((f) => f.readInt32BE(0));
          expect(ids).toEqual(Array.from({ length: perClient }, (_, k) => k + 1));
          const last = decodeResponseFrame(frames.at(-1)!, ApiKey.OffsetFetch, 8).body as OffsetFetchResponse;
          expect(last.groups[0]!.errorCode).toBe(0);
          const parts = last.groups[0]!.topics[0]!.partitions;
          expect(parts).toHaveLength(PARTITIONS);
          expect(
            parts.every((p) => p.metadata === METADATA && p.committedOffset === BigInt(p.partitionIndex)),
          ).toBe(true);
          answered += frames.length;
        }
      }
      const readMs = performance.now() - tRead;
      const after = await measure(20);
      const b = latencies(before);
      const d = latencies(during);
      console.log(
        `[faults] unread answers: ${readers} clients pipelined ${perClient} OffsetFetch each (~${mb(answerBytes)} MB an ` +
          `answer, ${mb(readers * perClient * answerBytes)} MB asked for) and did not read; proxy VmRSS ${mb(rssBefore)} MB ` +
          `before, max ${mb(Math.max(...rss))} MB during (+${mb(growth)}; samples ${rss.map(mb).join(' ')}), ` +
          `kop_response_buffer_bytes ${buffered.map(mb).join(' ')} MB; normal client commit+fetch+Metadata ` +
          `p50/p99/max ${fmt(b)} ms before (n=${before.length}), ${fmt(d)} ms during (n=${during.length}), ` +
          `${fmt(latencies(after))} ms after; ${answered} answers read in order ${(readMs / 1000).toFixed(1)} s ` +
          `after they started reading`,
      );
      expect(exceeded, `proxy VmRSS grew by more than ${mb(rssBound)} MB`).toBe(false);
      expect(growth).toBeLessThan(rssBound);
      // Served throughout, and none waited long (a generous bound: the machine is shared).
      expect(during.length).toBeGreaterThan(20);
      expect(d.max).toBeLessThan(5_000);
      expect(proxy.child.exitCode).toBe(null);
    } finally {
      for (const c of stallers) c.close();
      normal.close();
      await proxy.stop('SIGKILL');
    }
  });
});

/** Established TCP connections of process `pid` to `hostPort` (the broker). */
function connectionsTo(pid: number, hostPort: string): number {
  const port = hostPort.split(',')[0]!.split(':').at(-1);
  const out = execFileSync('ss', ['-tnpH', 'state', 'established', `dport = :${port}`], { encoding: 'utf8' });
  return out.split('\n').filter((l) => l.includes(`pid=${pid},`)).length;
}

describe('idle and slowloris connections', () => {
  test('hold no broker connection until they need the broker; the one that then asks is answered', async () => {
    const n = env('KOP_IDLE_CONNECTIONS', 3000);
    const { proxy, http } = await cli();
    const pid = proxy.child.pid!;
    const baseline = connectionsTo(pid, brokerBootstrap); // the proxy's own cluster connections
    const clientCount = async () => (await scrape(http, 'kop_connections_active', 'side="client"')) ?? 0;
    // A third send nothing, a third the first bytes of a size prefix, a third a 1,000-byte request
    // that never ends (30 bytes of it), trickling one byte every 500 ms. Opened in waves the proxy
    // accepts before the next: a burst beyond the listen backlog leaves connections the client
    // thinks open waiting in the kernel for a retransmitted handshake (tens of seconds).
    const probes: Probe[] = [];
    const wave = 300;
    for (let opened = 0; opened < n; opened += wave) {
      const count = Math.min(wave, n - opened);
      probes.push(
        ...(await openProbes(proxy.bootstrap, count, (socket, k) => {
          const i = opened + k;
          if (i % 3 === 1) socket.write(Buffer.from([0, 0]));
          if (i % 3 === 2) {
            const head = Buffer.alloc(30);
            head.writeInt32BE(1000, 0);
            head.writeInt16BE(ApiKey.Metadata, 4);
            head.writeInt16BE(12, 6);
            socket.write(head);
          }
        })),
      );
      for (let i = 0; i < 300 && (await clientCount()) < opened + count; i++) await sleep(100);
    }
    const trickle = setInterval(() => {
      for (const [i, p] of probes.entries()) if (i % 3 === 2 && !p.closed) p.socket.write(Buffer.from([0]));
    }, 500);
    try {
      await sleep(2_000);
      const clients = (await scrape(http, 'kop_connections_active', 'side="client"'))!;
      const brokerSide = (await scrape(http, 'kop_connections_active', 'side="broker"'))!;
      const held = connectionsTo(pid, brokerBootstrap) - baseline;
      const seen = tally(probes);
      // One of them asks: it gets its broker connection and its answer.
      const asking = probes[0]!;
      asking.socket.write(apiVersionsRequest(3, 7));
      await until(() => asking.received > 0, 'an answer to the connection that asked');
      const afterAsk = (await scrape(http, 'kop_connections_active', 'side="broker"'))!;
      console.log(
        `[faults] idle and slowloris: ${n} connections (${seen.open} open), ${clients} client connections, ` +
          `${brokerSide} broker connections for them (${held} seen with ss beyond the proxy's own ${baseline}); ` +
          `after one asked: ${afterAsk}`,
      );
      expect(seen.open).toBe(n);
      expect(clients).toBe(n);
      expect(brokerSide).toBe(0);
      expect(held).toBeLessThanOrEqual(0);
      expect(afterAsk).toBe(1);
    } finally {
      clearInterval(trickle);
      closeProbes(probes);
      await proxy.stop('SIGKILL');
    }
  });
});
