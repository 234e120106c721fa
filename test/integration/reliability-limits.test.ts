// Issue #7, bad input and memory bounds, through the CLI proxy (a child process: its RSS and its
// descriptors are its own) in front of the bed's broker:
// - many connections that send half of a large request and stall: the proxy's memory stays within
//   --max-buffered-request-bytes, others are served meanwhile, everything is released afterwards;
// - Java producers with 256 KiB batches through the native relay, the pool far smaller than their
//   requests together: every record arrives intact, and the pool is empty afterwards;
// - a connection storm with garbage, beyond --max-connections;
// - file-descriptor exhaustion (RLIMIT_NOFILE 256, 257): accept failures neither crash the proxy nor keep
//   it from serving once descriptors are free again.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { beforeAll, describe, expect, inject, test } from 'vitest';
import { decodeResponseFrame } from '../../protocol/frames.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { javaClient } from '../bed/clients/java.js';
import { createTopics } from '../bed/clients/kafkajs.js';
import { expectExactlyPaddedRecords, uniqueName } from '../bed/clients/scenarios.js';
import { ensureBuilt } from '../harness/proxy.js';
import { RawClient, apiVersionsRequest, produceRequest } from '../harness/raw-client.js';
import { commitOnce, fetchOnce, rssOf, sleep } from '../reliability/commit-checker.js';
import { until } from '../reliability/fault-helpers.js';
import {
  MiB,
  cliWithMetrics,
  closeProbes,
  fmt,
  latencies,
  mb,
  openProbes,
  roundTrips,
  scrape,
  tally,
} from '../reliability/limits-helpers.js';

const brokerBootstrap = inject('kafkaBootstrap');
const env = (name: string, fallback: number): number => Number(process.env[name] ?? fallback);

beforeAll(async () => {
  await ensureBuilt();
});

/** The CLI with the memory store, its HTTP endpoint (metrics) on a free port, lag off. */
const cli = (args: string[] = []) => cliWithMetrics(brokerBootstrap, args);

/** A normal client still gets Metadata, ApiVersions and an OffsetCommit/OffsetFetch round trip. */
async function expectServes(bootstrap: string, topic: string): Promise<number[]> {
  const client = await RawClient.connect(bootstrap);
  try {
    const times = await roundTrips(client, 20);
    const group = uniqueName('limits-g');
    expect(await commitOnce(client, group, topic, 1, 42n)).toEqual([0]);
    expect((await fetchOnce(client, group, topic, 1)).offsets.get(0)).toBe(42n);
    return times;
  } finally {
    client.close();
  }
}

describe('half-sent large requests', () => {
  test('memory stays within --max-buffered-request-bytes, others are served, all is released', async () => {
    const stallers = env('KOP_LIMITS_STALLERS', 500);
    const limit = 32 * MiB;
    const frameSize = 4 * MiB;
    const topic = uniqueName('limits-big');
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 1 }]);
    const { proxy, http } = await cli(['--max-buffered-request-bytes', String(limit)]);
    const pid = proxy.child.pid!;
    const other = await RawClient.connect(proxy.bootstrap);
    const stalled: RawClient[] = [];
    let big: RawClient | null = null;
    try {
      await roundTrips(other, 30); // warm-up
      const before = latencies(await roundTrips(other, 200));
      const rssBefore = rssOf(pid);
      const external = () => scrape(http, 'nodejs_external_memory_bytes') as Promise<number>;
      const externalBefore = await external();

      // Each staller announces a 4 MiB request (a Produce header) and sends half of it: 2 MiB each,
      // 1 GB in all for 500. The same body Buffer is written by all (the test process holds it once).
      const body = Buffer.alloc(frameSize / 2 - 8, 0x55);
      for (let i = 0; i < stallers; i += 100) {
        const batch = await Promise.all(
          Array.from({ length: Math.min(100, stallers - i) }, () => RawClient.connect(proxy.bootstrap)),
        );
        for (const [j, c] of batch.entries()) {
          const head = Buffer.alloc(12);
          head.writeInt32BE(frameSize, 0);
          head.writeInt16BE(ApiKey.Produce, 4);
          head.writeInt16BE(9, 6);
          head.writeInt32BE(i + j, 8);
          c.socket.write(head);
          c.socket.write(body);
        }
        stalled.push(...batch);
      }
      const admittedAtMost = Math.ceil(limit / frameSize);
      let muted = 0;
      const deadline = Date.now() + 20_000;
      while (Date.now() < deadline) {
        muted = (await scrape(http, 'kop_request_buffer_muted_connections')) ?? 0;
        if (muted >= stallers - admittedAtMost) break;
        await sleep(200);
      }
      await sleep(1_000);

      // A legitimate large request (a 600 KB Produce) arriving now must wait for memory...
      big = await RawClient.connect(proxy.bootstrap);
      big.write(produceRequest(9, 7, topic, 1, 'x'.repeat(600_000)));
      const bigAnswered = big.read(1, 30_000);
      bigAnswered.catch(() => {});

      const rss: number[] = [];
      const buffered: number[] = [];
      const during: number[] = [];
      for (let round = 0; round < 4; round++) {
        during.push(...(await roundTrips(other, 50)));
        rss.push(rssOf(pid));
        buffered.push((await scrape(http, 'kop_request_buffer_bytes'))!);
      }
      muted = (await scrape(http, 'kop_request_buffer_muted_connections'))!;
      const externalDuring = await external();
      const waitingBig = await Promise.race([bigAnswered.then(() => false), sleep(0).then(() => true)]);
      const duringLat = latencies(during);

      // ...and be answered once the stallers are gone, when all memory is released.
      const tClose = performance.now();
      for (const c of stalled) c.close();
      let left = -1;
      let mutedLeft = -1;
      const releaseDeadline = Date.now() + 20_000;
      while (Date.now() < releaseDeadline) {
        left = (await scrape(http, 'kop_request_buffer_bytes'))!;
        mutedLeft = (await scrape(http, 'kop_request_buffer_muted_connections'))!;
        if (left === 0 && mutedLeft === 0) break;
        await sleep(100);
      }
      const releasedMs = performance.now() - tClose;
      const [answer] = await bigAnswered;
      const bigMs = performance.now() - tClose;
      const produced = decodeResponseFrame(answer!, ApiKey.Produce, 9).body as {
        responses: { partitionResponses: { errorCode: number }[] }[];
      };
      // The proxy holds nothing any more (kop_request_buffer_bytes 0); the buffers are freed at
      // node's next collections and the allocator need not give pages back, so these are reported.
      await sleep(2_000);
      const externalAfter = await external();
      const rssAfter = rssOf(pid);
      const clients = await scrape(http, 'kop_connections_active', 'side="client"');

      // Held: at most the limit, one admitted request past it, one 64 KiB read per muted connection
      // (and one more 64 KiB read waiting in node's socket buffer, outside the count).
      const heldBound = limit + frameSize + stallers * 64 * 1024;
      const rssBound = heldBound + stallers * 64 * 1024 + 64 * MiB;
      console.log(
        `[limits] ${stallers} connections x half of a 4 MiB request (${mb(stallers * (frameSize / 2))} MB sent), ` +
          `--max-buffered-request-bytes ${mb(limit)} MiB: proxy VmRSS ${mb(rssBefore)} MB before, ` +
          `${rss.map(mb).join(' ')} MB during (bound +${mb(rssBound)}), ${mb(rssAfter)} MB 2 s after they closed ` +
          `(node's external memory, where the buffers live: ${mb(externalBefore)}, ${mb(externalDuring)}, ${mb(externalAfter)} MB); ` +
          `kop_request_buffer_bytes ${buffered.map(mb).join(' ')} MB (bound ${mb(heldBound)}), ${muted} muted; ` +
          `other client Metadata+ApiVersions p50/p99/max ${fmt(before)} ms before, ${fmt(duringLat)} ms during; ` +
          `a 600 KB Produce waited: ${waitingBig}, answered ${bigMs.toFixed(0)} ms after the stallers closed; ` +
          `buffer back to ${left} in ${releasedMs.toFixed(0)} ms`,
      );
      expect(proxy.child.exitCode).toBe(null);
      expect(Math.max(...rss) - rssBefore).toBeLessThan(rssBound);
      expect(Math.max(...buffered)).toBeLessThanOrEqual(heldBound);
      expect(muted).toBeGreaterThanOrEqual(stallers - admittedAtMost - 1);
      // Every round trip of the other client was answered while the stallers held the buffer (a
      // read of more than 10 s fails the test): the limit mutes the stallers, not everyone. Their
      // times are logged above, not asserted: speed belongs to the benchmarks.
      expect(waitingBig).toBe(true);
      expect(produced.responses[0]!.partitionResponses[0]!.errorCode).toBe(0);
      expect(left).toBe(0);
      expect(mutedLeft).toBe(0);
      expect(clients).toBe(2);
      await expectServes(proxy.bootstrap, topic);
    } finally {
      for (const c of stalled) c.close();
      big?.close();
      other.close();
      await proxy.stop('SIGKILL');
    }
  });
});

describe('large batches through the native relay with a small request memory pool', () => {
  test('Java producers with batch.size=262144: every record intact, the pool empty afterwards', async () => {
    const java = await javaClient(inject('kafkaClasspath'));
    const topic = uniqueName('limits-batches');
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 3 }]);
    // 1 MiB: two producers' requests of up to three 256 KiB batches each do not fit together, so
    // the native relay is refused reservations and hands requests back to be muted, and back again.
    const { proxy, http } = await cli([
      '--max-buffered-request-bytes',
      String(MiB),
      '--native-relay',
      'on',
      '--native-relay-after',
      '1',
    ]);
    try {
      const target = { bootstrap: proxy.bootstrap };
      const each = 6_000;
      const valueBytes = 1024;
      const produced = await Promise.all(
        [0, 1].map((n) =>
          java.produce(target, { topic, count: each, start: n * each, batchSize: 262_144, valueBytes }),
        ),
      );
      expect(produced.map((p) => p.count)).toEqual([each, each]);
      const moved = await scrape(http, 'kop_native_relay_handovers_total', 'to="native"');
      console.log(
        `[limits] 2 Java producers, batch.size=262144, 1 MiB pool: ${moved} moves to the native path`,
      );
      expect(moved).toBeGreaterThan(0);
      // Nothing held nor muted once the producers are done (a refused reservation mutes a connection).
      let held = -1;
      const deadline = Date.now() + 20_000;
      while ((held = (await scrape(http, 'kop_request_buffer_bytes'))!) !== 0 && Date.now() < deadline)
        await sleep(100);
      expect(held).toBe(0);
      expect(await scrape(http, 'kop_request_buffer_muted_connections')).toBe(0);
      const consumed = await java.consume(
        { bootstrap: brokerBootstrap },
        { topic, group: `${topic}-group`, max: 2 * each, timeoutMs: 90_000 },
      );
      expect(consumed.timedOut, `${consumed.records.length} of ${2 * each} records`).toBe(false);
      expectExactlyPaddedRecords(consumed.records, 0, 2 * each, valueBytes);
    } finally {
      await proxy.stop('SIGKILL');
    }
  }, 240_000);
});

describe('a connection storm with garbage', () => {
  test('beyond --max-connections connections are refused; the proxy keeps serving and recovers', async () => {
    const storm = env('KOP_LIMITS_STORM', 4000);
    const maxConnections = 300;
    const topic = uniqueName('limits-storm');
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 1 }]);
    const { proxy, http } = await cli(['--max-connections', String(maxConnections)]);
    const other = await RawClient.connect(proxy.bootstrap);
    let probes: Awaited<ReturnType<typeof openProbes>> = [];
    try {
      await roundTrips(other, 20);
      // Sample the proxy's own count of client connections all through the storm.
      let sampling = true;
      let maxActive = 0;
      const sampler = (async () => {
        while (sampling) {
          maxActive = Math.max(
            maxActive,
            (await scrape(http, 'kop_connections_active', 'side="client"')) ?? 0,
          );
          await sleep(50);
        }
      })();
      const t0 = performance.now();
      // Every connection sends something at once: a valid ApiVersions request, random bytes, the
      // start of a frame that never ends (it keeps its slot), or a size far beyond --max-frame-size.
      probes = await openProbes(proxy.bootstrap, storm, (socket, i) => {
        switch (i % 4) {
          case 0:
            socket.write(apiVersionsRequest(3, i));
            break;
          case 1:
            socket.write(randomBytes(8 + (i % 64)));
            break;
          case 2: {
            const partial = Buffer.alloc(24, 1);
            partial.writeInt32BE(1000, 0);
            socket.write(partial);
            break;
          }
          default: {
            const huge = Buffer.alloc(8);
            huge.writeInt32BE(0x7fffffff, 0);
            socket.write(huge);
          }
        }
      });
      const during = latencies(await roundTrips(other, 50));
      // Connections the kernel completed while the accept queue was full are accepted (and refused)
      // only when their handshake is retried, seconds later: wait for them.
      let seen = tally(probes);
      const settle = Date.now() + 25_000;
      while (seen.open > maxConnections && Date.now() < settle) {
        await sleep(200);
        seen = tally(probes);
      }
      await sleep(500);
      sampling = false;
      await sampler;
      const stormMs = performance.now() - t0;
      seen = tally(probes);
      const refused = (await scrape(http, 'kop_connections_refused_total'))!;
      const answeredApiVersions = probes.filter((p, i) => i % 4 === 0 && p.received > 0).length;
      console.log(
        `[limits] storm of ${storm} connections at once (--max-connections ${maxConnections}): ` +
          `${seen.connected} connected, ${seen.failed} failed to connect, ${seen.closed} closed by the proxy, ` +
          `${seen.open} still open after ${(stormMs / 1000).toFixed(1)} s, ${answeredApiVersions} ApiVersions answered; ` +
          `kop_connections_refused_total ${refused}, most client connections at once ${maxActive}; ` +
          `other client p50/p99/max ${fmt(during)} ms during the storm`,
      );
      expect(proxy.child.exitCode).toBe(null);
      expect(maxActive).toBeLessThanOrEqual(maxConnections);
      expect(seen.open).toBeLessThanOrEqual(maxConnections);
      expect(refused).toBeGreaterThan(storm / 2);
      expect(answeredApiVersions).toBeGreaterThan(0);
      closeProbes(probes);
      await until(() => probes.every((p) => p.closed), 'storm sockets closed', 10_000);
      let clients = -1;
      const deadline = Date.now() + 10_000;
      while (Date.now() < deadline && clients !== 1) {
        clients = (await scrape(http, 'kop_connections_active', 'side="client"'))!;
        await sleep(100);
      }
      expect(clients).toBe(1);
      const after = latencies(await expectServes(proxy.bootstrap, topic));
      console.log(`[limits] after the storm: a new client's round trip p50/p99 ${fmt(after)} ms`);
      expect((await roundTrips(other, 5)).length).toBe(5);
    } finally {
      closeProbes(probes);
      other.close();
      await proxy.stop('SIGKILL');
    }
  });
});

describe('file descriptors exhausted', () => {
  test('with RLIMIT_NOFILE 256 and 257, accept failures do not crash the proxy, which serves again once they are free', async () => {
    const topic = uniqueName('limits-fd');
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 1 }]);
    const { proxy } = await cli([]);
    const pid = proxy.child.pid!;
    // The soft limit: 256, then 257 (raising the hard limit would need privileges).
    const setLimit = (n: number) => {
      execFileSync('prlimit', ['--pid', String(pid), `--nofile=${n}:257`]);
      expect(readFileSync(`/proc/${pid}/limits`, 'utf8')).toMatch(
        new RegExp(`Max open files\\s+${n}\\s+257`),
      );
    };
    const other = await RawClient.connect(proxy.bootstrap);
    const waves: string[] = [];
    let closedAtAccept = 0;
    const brokerConnectFailures = () =>
      proxy
        .output()
        .split('\n')
        .filter((l) => l.includes('no broker connection') && l.includes('EMFILE')).length;
    try {
      await roundTrips(other, 20);
      for (let wave = 1; wave <= 2; wave++) {
        // Each connection costs the proxy two descriptors (client and broker): 600 need 1,200. Its
        // other descriptors are odd or even in number: with 256 and then 257, one of the waves ends
        // with no descriptor left for accept() itself (libuv then accepts and closes what it
        // cannot keep), the other with one, which accept() gets and the broker connect then lacks.
        setLimit(255 + wave);
        const logged = brokerConnectFailures();
        const probes = await openProbes(proxy.bootstrap, 600, (socket, i) =>
          socket.write(apiVersionsRequest(3, i)),
        );
        await sleep(1_500);
        const during = latencies(await roundTrips(other, 20));
        const seen = tally(probes);
        // Read here, not from the proxy's metrics: counting its descriptors needs one.
        const fds = readdirSync(`/proc/${pid}/fd`).length;
        const unanswered = probes.filter((p) => p.connected && p.closed && p.received === 0).length;
        const connectFailed = brokerConnectFailures() - logged;
        closedAtAccept += unanswered - connectFailed;
        waves.push(
          `limit ${255 + wave}: ${seen.connected} connected, ${seen.answered} answered, ` +
            `${unanswered} closed unanswered (${connectFailed} after their broker connect failed with EMFILE, ` +
            `${unanswered - connectFailed} at accept), proxy open fds ${fds}, other client p50/p99 ${fmt(during)} ms`,
        );
        expect(proxy.child.exitCode).toBe(null);
        // The limit was really hit: not every connection could be served.
        expect(probes.filter((p) => p.connected && p.received === 0).length).toBeGreaterThan(0);
        expect(seen.answered).toBeGreaterThan(0);
        closeProbes(probes);
        await until(() => probes.every((p) => p.closed), 'probes closed', 10_000);
        await sleep(500);
        // Descriptors are free again: all of a new batch is served.
        const again = await openProbes(proxy.bootstrap, 50, (socket, i) =>
          socket.write(apiVersionsRequest(3, i)),
        );
        await until(() => again.every((p) => p.received > 0 || p.closed), 'second batch answered', 10_000);
        expect(tally(again).answered).toBe(50);
        closeProbes(again);
        await expectServes(proxy.bootstrap, topic);
      }
      const acceptFailed = (proxy.output().match(/"accept failed"/g) ?? []).length;
      console.log(
        `[limits] RLIMIT_NOFILE: ${waves.join('; ')}; 'accept failed' logged ${acceptFailed} times`,
      );
      // accept() itself ran out of descriptors in one of the waves: those connections were closed by
      // libuv, no error reached the proxy, and it served again afterwards.
      expect(closedAtAccept).toBeGreaterThan(0);
      expect(proxy.child.exitCode).toBe(null);
    } finally {
      other.close();
      await proxy.stop('SIGKILL');
    }
  });
});
