// Issue #43: a TLS client that stalls its handshake. The proxy counts a TLS connection against
// --max-connections from accept; before --client-tls-handshake-timeout-ms, one that stopped half-way
// kept its place for as long as the client stayed connected (Node reports a handshake timeout but
// does not close the socket). Through the CLI proxy in front of the bed's broker:
// - a handshake stopped half-way (the first bytes of a ClientHello, or nothing after connecting) is
//   closed once the timeout has passed, and its place under --max-connections serves a new client;
// - a handshake that is slow but progressing (every byte of the client's delayed by a relay) and
//   finishes within the timeout is served.
// Asserted: behaviour; the only time compared is a lower bound (not closed before the timeout).
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { createTopics } from '../bed/clients/kafkajs.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { makeTestCerts } from '../harness/certs.js';
import type { TestCerts } from '../harness/certs.js';
import { ensureBuilt } from '../harness/proxy.js';
import { RawClient, splitHostPort } from '../harness/raw-client.js';
import { commitOnce, fetchOnce, sleep } from '../reliability/commit-checker.js';
import { until } from '../reliability/fault-helpers.js';
import * as limits from '../reliability/limits-helpers.js';
import type { Probe } from '../reliability/limits-helpers.js';
const { cliWithMetrics, closeProbes, openProbes, roundTrips, scrape, tally } = limits;

const brokerBootstrap = inject('kafkaBootstrap');
const TIMEOUT_MS = 5_000;
/** The first bytes of a TLS ClientHello (a handshake record announcing 512 bytes), then nothing. */
const PARTIAL_CLIENT_HELLO = Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]);

let certs: TestCerts;
let topic: string;
beforeAll(async () => {
  await ensureBuilt();
  certs = makeTestCerts();
  topic = uniqueName('tls-handshake');
  await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 1 }]);
});
afterAll(() => certs?.remove());

/** The CLI serving TLS with the test's certificate, the handshake timeout, and `maxConnections` places. */
async function tlsProxy(maxConnections: number) {
  const serveTls = ['--client-tls-cert', certs.files.serverCert, '--client-tls-key', certs.files.serverKey];
  const limits = [
    '--max-connections',
    `${maxConnections}`,
    '--client-tls-handshake-timeout-ms',
    `${TIMEOUT_MS}`,
  ];
  return cliWithMetrics(brokerBootstrap, [...limits, ...serveTls]);
}

const clientTls = () => ({ ca: [certs.ca], servername: 'localhost' });

/** A relay to `target` that holds each chunk the client sends for `delayMs` (in order); answers pass at once. */
async function slowRelay(target: string, delayMs: number): Promise<{ address: string; close: () => void }> {
  const [host, port] = splitHostPort(target);
  const sockets: net.Socket[] = [];
  const server = net.createServer((client) => {
    const upstream = net.connect({ host, port });
    sockets.push(client, upstream);
    let queue = Promise.resolve();
    client.on('data', (chunk: Buffer) => {
      queue = queue.then(() => sleep(delayMs)).then(() => void upstream.write(chunk));
    });
    upstream.on('data', (chunk: Buffer) => client.write(chunk));
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    address: `127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

describe('--client-tls-handshake-timeout-ms', () => {
  test('a handshake stopped half-way is closed after the timeout, and its place serves a new client', async () => {
    // The existing client and two stalled handshakes fill the three places.
    const { proxy, http } = await tlsProxy(3);
    const other = await RawClient.connect(proxy.bootstrap, { tls: clientTls() });
    let stalled: Probe[] = [];
    try {
      await roundTrips(other, 2);
      const openedAt = performance.now();
      stalled = await openProbes(proxy.bootstrap, 2, (socket, i) => {
        if (i === 0) socket.write(PARTIAL_CLIENT_HELLO);
      });
      const closedAt: number[] = [];
      for (const p of stalled) p.socket.once('close', () => closedAt.push(performance.now() - openedAt));
      // While they hold their places, a new connection is refused at accept.
      const refusedBefore = (await scrape(http, 'kop_connections_refused_total')) ?? 0;
      const [extra] = await openProbes(proxy.bootstrap, 1, () => {});
      await until(() => extra!.closed, 'a fourth connection refused', 30_000);
      expect(((await scrape(http, 'kop_connections_refused_total')) ?? 0) - refusedBefore).toBe(1);
      expect(tally(stalled).open).toBe(2);

      await until(() => stalled.every((p) => p.closed), 'stalled handshakes closed by the proxy', 60_000);
      console.log(
        `[tls-handshake] 2 stalled handshakes closed after ${closedAt.map((ms) => ms.toFixed(0)).join(', ')} ms ` +
          `(--client-tls-handshake-timeout-ms ${TIMEOUT_MS})`,
      );
      // Not before the timeout (timers never fire early; measured from before the proxy accepted).
      for (const ms of closedAt) expect(ms).toBeGreaterThanOrEqual(TIMEOUT_MS);
      // Their places are free: a new TLS client commits and reads it back; the existing one still works.
      const fresh = await RawClient.connect(proxy.bootstrap, { tls: clientTls() });
      try {
        const group = uniqueName('tls-handshake-g');
        expect(await commitOnce(fresh, group, topic, 1, 5n)).toEqual([0]);
        expect((await fetchOnce(fresh, group, topic, 1)).offsets.get(0)).toBe(5n);
      } finally {
        fresh.close();
      }
      expect((await roundTrips(other, 2)).length).toBe(2);
      expect(proxy.child.exitCode).toBe(null);
    } finally {
      closeProbes(stalled);
      other.close();
      await proxy.stop('SIGKILL');
    }
  }, 180_000);

  test('a slow handshake that progresses and finishes within the timeout is served', async () => {
    const { proxy } = await tlsProxy(10);
    // Each flight of the client (ClientHello, then its Finished) held for 1 s: about 2 s in all.
    const relay = await slowRelay(proxy.bootstrap, 1_000);
    try {
      const t0 = performance.now();
      const slow = await RawClient.connect(relay.address, { tls: clientTls() });
      const handshakeMs = performance.now() - t0;
      try {
        console.log(
          `[tls-handshake] a handshake delayed by a relay finished in ${handshakeMs.toFixed(0)} ms`,
        );
        // It was slow (the relay held the ClientHello), and it is served.
        expect(handshakeMs).toBeGreaterThanOrEqual(1_000);
        expect((await roundTrips(slow, 2)).length).toBe(2);
        expect(await slow.closesWithin(0)).toBe(false);
      } finally {
        slow.close();
      }
    } finally {
      relay.close();
      await proxy.stop('SIGKILL');
    }
  }, 180_000);
});
