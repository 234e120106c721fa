// Issue #20, clients that do not read, through the CLI proxy (a child process: its RSS is its own)
// in front of the bed's broker:
// - idle and slowloris connections (nothing sent, or a request that never ends) hold no broker
//   connection: the proxy opens one when a client first needs the broker.
import { execFileSync } from 'node:child_process';
import { beforeAll, describe, expect, inject, test } from 'vitest';
import { ApiKey } from '../../protocol/messages/index.js';
import { ensureBuilt } from '../harness/proxy.js';
import { apiVersionsRequest } from '../harness/raw-client.js';
import { sleep } from '../reliability/commit-checker.js';
import { until } from '../reliability/fault-helpers.js';
import { cliWithMetrics, closeProbes, openProbes, scrape, tally } from '../reliability/limits-helpers.js';
import type { Probe } from '../reliability/limits-helpers.js';

const brokerBootstrap = inject('kafkaBootstrap');
const env = (name: string, fallback: number): number => Number(process.env[name] ?? fallback);

beforeAll(async () => {
  await ensureBuilt();
});

/** The CLI with the memory store, its HTTP endpoint (metrics) on a free port, lag off. */
const cli = (args: string[] = []) => cliWithMetrics(brokerBootstrap, args);

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
