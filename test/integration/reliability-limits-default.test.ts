// Issue #43, the default limits at their defaults, through the CLI proxy (a child process: its
// descriptors are its own) in front of the bed's broker:
// - 10,000 client connections at once against the default --max-connections (10,000): the limit is
//   reached and never passed, probes and an existing client are answered meanwhile, all is
//   released after;
// - a TLS handshake storm (full handshakes, garbage, half-open handshakes) on a TLS listener:
//   probes and an existing TLS client answered, every full handshake served, recovery after;
// reliability-limits.test.ts has the storm beyond a small --max-connections and RLIMIT_NOFILE 256;
// reliability-descriptors.test.ts descriptors running out (the process's and the system's) while
// the store client and the proxy's cluster connection must reconnect.
// Asserted: behaviour, never speed (the times are logged).
import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { createTopics } from '../bed/clients/kafkajs.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { makeTestCerts } from '../harness/certs.js';
import type { TestCerts } from '../harness/certs.js';
import { commitsAndFetches, probesAnswer } from '../harness/limits-checks.js';
import { ensureBuilt } from '../harness/proxy.js';
import { RawClient, apiVersionsRequest, splitHostPort } from '../harness/raw-client.js';
import { sleep } from '../reliability/commit-checker.js';
import { until } from '../reliability/fault-helpers.js';
import {
  clientConnectionsSettle,
  closeProbes,
  cliWithMetrics,
  fmt,
  latencies,
  openProbes,
  raiseNofile,
  roundTrips,
  scrape,
  tally,
} from '../reliability/limits-helpers.js';
import type { Probe } from '../reliability/limits-helpers.js';

const brokerBootstrap = inject('kafkaBootstrap');
const env = (name: string, fallback: number): number => Number(process.env[name] ?? fallback);
const DEFAULT_MAX_CONNECTIONS = 10_000;
/** Garbage that is not TLS (random bytes starting 0x16 would be a handshake record waiting for more). */
const NOT_TLS = Buffer.concat([Buffer.from('GET / HTTP/1.1\r\n'), randomBytes(48)]);
/** The first bytes of a TLS ClientHello (a handshake record announcing 512 bytes), then nothing. */
const PARTIAL_CLIENT_HELLO = Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]);

let topic: string;
beforeAll(async () => {
  await ensureBuilt();
  topic = uniqueName('limits-default');
  await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 1 }]);
});

describe('10,000 connections at once at the default --max-connections', () => {
  test('the limit is reached and never passed; probes and an existing client are answered; all is released', async () => {
    const storm = env('KOP_LIMITS_DEFAULT_STORM', 10_500);
    // Descriptors for the storm's sockets here and the proxy's connections there (one each, two
    // for the few that reach the broker), raised to them where the soft limit is lower.
    raiseNofile(process.pid, storm + 1_000);
    const { proxy, http } = await cliWithMetrics(brokerBootstrap);
    const pid = proxy.child.pid!;
    raiseNofile(pid, DEFAULT_MAX_CONNECTIONS + 1_000);
    const other = await RawClient.connect(proxy.bootstrap);
    const probes: Probe[] = [];
    try {
      await roundTrips(other, 10);
      let sampling = true;
      let maxActive = 0;
      const sampler = (async () => {
        while (sampling) {
          const active = await scrape(http, 'kop_connections_active', 'side="client"').catch(() => 0);
          maxActive = Math.max(maxActive, active ?? 0);
          await sleep(100);
        }
      })();
      const t0 = performance.now();
      // Opened in waves below the listen backlog (511): a connection the kernel completed while the
      // accept queue overflowed and that never sends is never accepted, and proves nothing. Most
      // send the start of a frame that never ends (they keep their slot); one in 50 asks
      // ApiVersions (the proxy passes it to the broker), one in 50 sends garbage (closed).
      for (let from = 0; from < storm; from += 400)
        probes.push(
          ...(await openProbes(
            proxy.bootstrap,
            Math.min(400, storm - from),
            (socket, k) => {
              const i = from + k;
              if (i % 50 === 0) socket.write(apiVersionsRequest(3, i));
              else if (i % 50 === 1) socket.write(randomBytes(16));
              else socket.write(Buffer.from([0, 0, 0x03, 0xe8, 0, 18, 0, 3]));
            },
            60_000,
          )),
        );
      const connectedMs = performance.now() - t0;
      // Meanwhile: the existing client, and the probes on new connections.
      const during = latencies(await roundTrips(other, 20));
      await probesAnswer(http);
      // Every connection accepted (and kept or refused) or closed: the proxy at its limit.
      let seen = tally(probes);
      const settle = Date.now() + 90_000;
      while (
        (seen.open + 1 > DEFAULT_MAX_CONNECTIONS || maxActive < DEFAULT_MAX_CONNECTIONS) &&
        Date.now() < settle
      ) {
        await sleep(500);
        seen = tally(probes);
      }
      // A connection the proxy closes after the last wave was refused (garbage whose frame it
      // judged late) leaves its slot free with nobody left to take it: a last handful of quiet
      // connections fills such slots, and the rest of them are refused.
      probes.push(
        ...(await openProbes(
          proxy.bootstrap,
          20,
          (socket) => socket.write(Buffer.from([0, 0, 0x03, 0xe8, 0, 18, 0, 3])),
          60_000,
        )),
      );
      await sleep(1_000);
      sampling = false;
      await sampler;
      seen = tally(probes);
      const active = (await scrape(http, 'kop_connections_active', 'side="client"'))!;
      const refused = (await scrape(http, 'kop_connections_refused_total'))!;
      const fds = readdirSync(`/proc/${pid}/fd`).length;
      const answered = probes.filter((p, i) => i % 50 === 0 && p.received > 0).length;
      console.log(
        `[limits-default] ${storm} connections at once, default --max-connections: ${seen.connected} connected ` +
          `(in ${(connectedMs / 1000).toFixed(1)} s), ${seen.failed} failed to connect, ${seen.closed} closed by the proxy, ` +
          `${seen.open} open; kop_connections_active ${active} (most ${maxActive}), refused ${refused}; ` +
          `${answered} of ${Math.ceil(storm / 50)} ApiVersions answered; proxy fds ${fds}; ` +
          `existing client Metadata+ApiVersions p50/p99/max ${fmt(during)} ms`,
      );
      expect(proxy.child.exitCode).toBe(null);
      // Never more than the default limit, and it was reached (the storm is larger than it).
      expect(maxActive).toBeLessThanOrEqual(DEFAULT_MAX_CONNECTIONS);
      expect(active).toBe(DEFAULT_MAX_CONNECTIONS);
      expect(seen.open + 1).toBe(DEFAULT_MAX_CONNECTIONS);
      expect(refused).toBeGreaterThan(0);
      expect(answered).toBeGreaterThan(0);
      await commitsAndFetches(other, topic, 7n);

      // Released: the storm closes, the proxy is back to the one client and serves a new one.
      closeProbes(probes);
      await until(() => probes.every((p) => p.closed), 'storm sockets closed', 30_000);
      expect(await clientConnectionsSettle(http, 1, 30_000)).toBe(1);
      const fresh = await RawClient.connect(proxy.bootstrap);
      try {
        await commitsAndFetches(fresh, topic, 8n);
      } finally {
        fresh.close();
      }
      await probesAnswer(http);
    } finally {
      closeProbes(probes);
      other.close();
      await proxy.stop('SIGKILL');
    }
  }, 300_000);
});

describe('a TLS handshake storm', () => {
  let certs: TestCerts;
  beforeAll(() => {
    certs = makeTestCerts();
  });
  afterAll(() => certs?.remove());

  test('full, garbage and half-open handshakes at once: probes and an existing TLS client answered, recovery after', async () => {
    const storm = env('KOP_LIMITS_TLS_STORM', 1_500);
    const { proxy, http } = await cliWithMetrics(brokerBootstrap, [
      '--client-tls-cert',
      certs.files.serverCert,
      '--client-tls-key',
      certs.files.serverKey,
    ]);
    const pid = proxy.child.pid!;
    const clientTls = { ca: [certs.ca], servername: 'localhost' };
    const other = await RawClient.connect(proxy.bootstrap, { tls: clientTls });
    const [host, port] = splitHostPort(proxy.bootstrap);
    const sockets: net.Socket[] = [];
    try {
      await roundTrips(other, 10);
      const fdsBefore = readdirSync(`/proc/${pid}/fd`).length;
      // A third complete the handshake and ask ApiVersions; a third send garbage (not TLS); a
      // third stop half-way: the first bytes of a ClientHello, or nothing at all after connecting.
      type State = { answered: boolean; closed: boolean };
      const full: State[] = [];
      const garbage: State[] = [];
      const half: State[] = [];
      const t0 = performance.now();
      // In waves below the listen backlog (511), each awaited until its sockets connected.
      for (let from = 0; from < storm; from += 300) {
        const wave: Promise<unknown>[] = [];
        for (let i = from; i < Math.min(storm, from + 300); i++) {
          const s =
            i % 3 === 0
              ? tls.connect({ host, port, ...clientTls }, () => s.write(apiVersionsRequest(3, i)))
              : net.connect({ host, port }, () => {
                  if (i % 3 === 1) s.write(NOT_TLS);
                  else if (i % 6 === 2) s.write(PARTIAL_CLIENT_HELLO);
                });
          const state = { answered: false, closed: false };
          (i % 3 === 0 ? full : i % 3 === 1 ? garbage : half).push(state);
          s.on('data', () => (state.answered = true));
          s.on('error', () => undefined);
          s.once('close', () => (state.closed = true));
          wave.push(new Promise((r) => (s.once('connect', r), s.once('close', r))));
          sockets.push(s);
        }
        await Promise.race([Promise.all(wave), sleep(60_000)]);
      }
      // Meanwhile: the existing TLS client, and the probes.
      const during = latencies(await roundTrips(other, 20));
      await probesAnswer(http);
      const settled = () => full.every((s) => s.answered || s.closed) && garbage.every((s) => s.closed);
      const deadline = Date.now() + 120_000;
      while (!settled() && Date.now() < deadline) await sleep(200);
      const stormMs = performance.now() - t0;
      const fdsDuring = readdirSync(`/proc/${pid}/fd`).length;
      const answered = full.filter((s) => s.answered).length;
      const halfOpen = half.filter((s) => !s.closed).length;
      console.log(
        `[limits-default] TLS storm of ${storm}: ${answered} of ${full.length} full handshakes answered, ` +
          `${garbage.filter((s) => s.closed).length} of ${garbage.length} garbage connections closed, ` +
          `${halfOpen} of ${half.length} half-open handshakes still held after ${(stormMs / 1000).toFixed(1)} s; ` +
          `proxy fds ${fdsBefore} before, ${fdsDuring} during; existing TLS client p50/p99/max ${fmt(during)} ms`,
      );
      expect(proxy.child.exitCode).toBe(null);
      expect(garbage.filter((s) => !s.closed)).toEqual([]);
      expect(answered).toBe(full.length);
      await commitsAndFetches(other, topic, 9n);

      // Recovery: the storm's sockets close, the proxy's descriptors go back, a new TLS client is served.
      for (const s of sockets) s.destroy();
      await until(
        () => readdirSync(`/proc/${pid}/fd`).length <= fdsBefore + 5,
        'descriptors released',
        30_000,
      );
      const fresh = await RawClient.connect(proxy.bootstrap, { tls: clientTls });
      try {
        await commitsAndFetches(fresh, topic, 10n);
      } finally {
        fresh.close();
      }
      await probesAnswer(http);
      expect((await roundTrips(other, 5)).length).toBe(5);
    } finally {
      for (const s of sockets) s.destroy();
      other.close();
      await proxy.stop('SIGKILL');
    }
  }, 300_000);
});

describe('TLS handshakes that never end, beyond --max-connections', () => {
  let certs: TestCerts;
  beforeAll(() => {
    certs = makeTestCerts();
  });
  afterAll(() => certs?.remove());

  test('count against the limit from accept: the rest are refused, the existing TLS client is answered', async () => {
    const maxConnections = 100;
    const { proxy, http } = await cliWithMetrics(brokerBootstrap, [
      '--max-connections',
      String(maxConnections),
      '--client-tls-cert',
      certs.files.serverCert,
      '--client-tls-key',
      certs.files.serverKey,
    ]);
    const clientTls = { ca: [certs.ca], servername: 'localhost' };
    const other = await RawClient.connect(proxy.bootstrap, { tls: clientTls });
    let probes: Probe[] = [];
    try {
      await roundTrips(other, 5);
      // 300 connections that start a handshake and stop (half send the first bytes of a ClientHello).
      probes = await openProbes(proxy.bootstrap, 300, (socket, i) => {
        if (i % 2 === 0) socket.write(PARTIAL_CLIENT_HELLO);
      });
      const deadline = Date.now() + 30_000;
      while (tally(probes).open + 1 > maxConnections && Date.now() < deadline) await sleep(200);
      const seen = tally(probes);
      const refused = (await scrape(http, 'kop_connections_refused_total'))!;
      console.log(
        `[limits-default] 300 TLS handshakes stopped half-way, --max-connections ${maxConnections}: ${seen.open} held, ` +
          `${seen.closed} closed, kop_connections_refused_total ${refused}`,
      );
      // The existing client holds one of the 100: 99 handshakes held at most, the rest refused.
      expect(seen.open).toBeLessThanOrEqual(maxConnections - 1);
      expect(refused).toBeGreaterThanOrEqual(300 - (maxConnections - 1));
      expect((await roundTrips(other, 5)).length).toBe(5);
      closeProbes(probes);
      await until(() => probes.every((p) => p.closed), 'handshakes closed', 10_000);
      // Their places are free again: a new TLS client is served.
      const fresh = await RawClient.connect(proxy.bootstrap, { tls: clientTls });
      try {
        await commitsAndFetches(fresh, topic, 11n);
      } finally {
        fresh.close();
      }
    } finally {
      closeProbes(probes);
      other.close();
      await proxy.stop('SIGKILL');
    }
  });
});
