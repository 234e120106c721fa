// Shared pieces of test/integration/reliability-limits.test.ts and reliability-unread-responses.test.ts:
// the CLI with its metrics, many raw sockets opened at once (each recording what happened to it),
// the proxy's own metrics read over HTTP, round-trip latencies.
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { Worker } from 'node:worker_threads';
import { ApiKey } from '../../protocol/messages/index.js';
import type { ApiVersionsResponse } from '../../protocol/messages/api-versions-response.js';
import type { MetadataResponse } from '../../protocol/messages/metadata-response.js';
import { freePortRange, spawnProxy } from '../harness/proxy.js';
import type { ProxyProcess } from '../harness/proxy.js';
import type { RawClient } from '../harness/raw-client.js';
import { metadataRequestBody, splitHostPort } from '../harness/raw-client.js';

/** The CLI with the memory store in front of `bootstrap`, its HTTP endpoint (metrics) on a free port, lag off. */
export async function cliWithMetrics(
  bootstrap: string,
  args: string[] = [],
  launcher: string[] = [],
): Promise<{ proxy: ProxyProcess; http: string }> {
  const http = `127.0.0.1:${await freePortRange(0)}`;
  const proxy = await spawnProxy(
    [
      '--bootstrap-server',
      bootstrap,
      '--store',
      'memory://',
      '--http',
      http,
      '--lag-interval-ms',
      '0',
      ...args,
    ],
    {},
    [],
    undefined,
    launcher,
  );
  return { proxy, http };
}

/** One value of the proxy's /metrics: `name` with exactly `labels` (e.g. `side="client"`), or undefined. */
export async function scrape(http: string, name: string, labels = ''): Promise<number | undefined> {
  const text = await (await fetch(`http://${http}/metrics`)).text();
  const series = labels === '' ? name : `${name}{${labels}}`;
  for (const line of text.split('\n')) {
    if (line.startsWith(series + ' ')) return Number(line.slice(series.length + 1));
  }
  return undefined;
}

/** The proxy's client connections (kop_connections_active) once they reach `want`, or at `timeoutMs`. */
export async function clientConnectionsSettle(
  http: string,
  want: number,
  timeoutMs: number,
): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const clients = (await scrape(http, 'kop_connections_active', 'side="client"'))!;
    if (clients === want || Date.now() > deadline) return clients;
    await new Promise((r) => setTimeout(r, 200));
  }
}

export interface Latencies {
  p50: number;
  p99: number;
  max: number;
}

export function latencies(ms: number[]): Latencies {
  const s = [...ms].sort((a, b) => a - b);
  return { p50: s[Math.floor(s.length / 2)]!, p99: s[Math.floor(s.length * 0.99)]!, max: s[s.length - 1]! };
}

export const fmt = (l: Latencies): string => `${l.p50.toFixed(1)}/${l.p99.toFixed(1)}/${l.max.toFixed(1)}`;

let correlation = 1;

/** `n` round trips of Metadata v12 then ApiVersions v3, each checked; ms per round trip. */
export async function roundTrips(client: RawClient, n: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const md = await client.request<MetadataResponse>(
      ApiKey.Metadata,
      12,
      correlation++,
      metadataRequestBody(),
    );
    if (md.brokers.length === 0) throw new Error('Metadata without brokers');
    const av = await client.request<ApiVersionsResponse>(ApiKey.ApiVersions, 3, correlation++, {
      clientSoftwareName: 'limits-test',
      clientSoftwareVersion: '1.0',
    });
    if (av.errorCode !== 0) throw new Error(`ApiVersions error ${av.errorCode}`);
    times.push(performance.now() - t0);
  }
  return times;
}

/** A raw socket and what happened to it. */
export interface Probe {
  socket: net.Socket;
  connected: boolean;
  /** Bytes received from the proxy (an answer). */
  received: number;
  closed: boolean;
  error: string | null;
}

/**
 * Opens `n` sockets at once; `onConnect` writes what each sends. Resolves when every one is
 * connected or failed (or after `timeoutMs`).
 */
export async function openProbes(
  hostPort: string,
  n: number,
  onConnect: (socket: net.Socket, index: number) => void,
  timeoutMs = 30_000,
): Promise<Probe[]> {
  const [host, port] = splitHostPort(hostPort);
  let settled = 0;
  let wake: () => void = () => {};
  const all = new Promise<void>((resolve) => (wake = resolve));
  const settle = (p: Probe & { settled?: boolean }) => {
    if (p.settled) return;
    p.settled = true;
    if (++settled === n) wake();
  };
  const probes = Array.from({ length: n }, (_, i) => {
    const socket = net.connect({ host, port });
    const p: Probe & { settled?: boolean } = {
      socket,
      connected: false,
      received: 0,
      closed: false,
      error: null,
    };
    socket.once('connect', () => {
      p.connected = true;
      settle(p);
      onConnect(socket, i);
    });
    socket.on('data', (d: Buffer) => (p.received += d.length));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      p.error = err.code ?? err.message;
      settle(p);
    });
    socket.once('close', () => {
      p.closed = true;
      settle(p);
    });
    return p;
  });
  await Promise.race([all, new Promise((r) => setTimeout(r, timeoutMs))]);
  return probes;
}

export function closeProbes(probes: Probe[]): void {
  for (const p of probes) p.socket.destroy();
}

/** How the probes ended up: connected, answered, closed by the proxy, still open, failed to connect. */
export function tally(probes: Probe[]) {
  return {
    connected: probes.filter((p) => p.connected).length,
    answered: probes.filter((p) => p.received > 0).length,
    closed: probes.filter((p) => p.connected && p.closed).length,
    open: probes.filter((p) => p.connected && !p.closed).length,
    failed: probes.filter((p) => !p.connected).length,
  };
}

export const MiB = 1024 * 1024;
export const mb = (bytes: number): string => (bytes / MiB).toFixed(0);

/** The soft and hard RLIMIT_NOFILE of a process (/proc/PID/limits). */
export function nofileOf(pid: number): { soft: number; hard: number } {
  const m = /Max open files\s+(\d+)\s+(\d+)/.exec(readFileSync(`/proc/${pid}/limits`, 'utf8'));
  if (m === null) throw new Error(`no open-files limit in /proc/${pid}/limits`);
  return { soft: Number(m[1]), hard: Number(m[2]) };
}

/**
 * Raises a process's soft RLIMIT_NOFILE to `need` (no privilege needed up to the hard limit);
 * fails, naming the limit, where the hard limit is lower (`ulimit -Hn`).
 */
export function raiseNofile(pid: number, need: number): void {
  const { soft, hard } = nofileOf(pid);
  if (soft >= need) return;
  if (hard < need)
    throw new Error(
      `this test needs ${need} descriptors per process; the hard limit is ${hard} (ulimit -Hn)`,
    );
  execFileSync('prlimit', ['--pid', String(pid), `--nofile=${need}:${hard}`]);
}

/** `pid`'s established TCP connections to 127.0.0.1:`port`: local port and descriptor (`ss -p`). */
export function socketsOf(pid: number, port: number): { port: number; fd: number }[] {
  const out = execFileSync('ss', ['-tnpH', 'state', 'established', `dport = :${port}`], { encoding: 'utf8' });
  return out
    .split('\n')
    .map((l) => ({ m: /\S+:(\d+)\s+\S+:\d+/.exec(l), fd: new RegExp(`pid=${pid},fd=(\\d+)`).exec(l) }))
    .filter(({ m, fd }) => m !== null && fd !== null)
    .map(({ m, fd }) => ({ port: Number(m![1]), fd: Number(fd![1]) }));
}

/** Local ports of `pid`'s established TCP connections to 127.0.0.1:`port`. */
export function socketsTo(pid: number, port: number): number[] {
  return socketsOf(pid, port).map((s) => s.port);
}

/**
 * Resets the TCP connections from these local ports to `remotePort` (`ss -K`: a network that cut
 * them). The remote port is part of the filter: `ss -K` acts on every process, and Linux gives the
 * same ephemeral port to connections to different destinations, so a local port alone can name a
 * connection of another process (the test's own HTTP probe, another test's client).
 */
export function resetSockets(localPorts: number[], remotePort: number): void {
  for (const p of localPorts)
    execFileSync('ss', ['-K', '-tnH', 'src', `127.0.0.1:${p}`, 'dst', `127.0.0.1:${remotePort}`]);
}

/**
 * The probe loop of keptAliveProbes, in a worker thread of its own: the tests block their own
 * thread in execFileSync (`ss -p` reads every process's descriptors: seconds on a busy machine),
 * and an HTTP agent on that thread then finds its kept-alive socket idle past the server's
 * Keep-Alive timeout and closes it, so the next probe needs a new descriptor just when there is
 * none (the clean-clone CI failed on that).
 */
const PROBE_WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const http = require('node:http');
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
let running = true;
parentPort.on('message', () => { running = false; });
const ask = (path) => new Promise((resolve) => {
  const req = http.get({ host: workerData.host, port: workerData.port, path, agent, timeout: 10000 }, (res) => {
    res.resume();
    res.on('end', () => resolve(res.statusCode ?? 0));
  });
  req.on('timeout', () => req.destroy(new Error('timeout')));
  req.on('error', (err) => resolve(err.code ?? err.message));
});
(async () => {
  while (running) {
    for (const path of ['/healthz', '/readyz']) parentPort.postMessage({ path, status: await ask(path) });
    await new Promise((r) => setTimeout(r, 500));
  }
  agent.destroy();
  parentPort.close();
})();
`;

/**
 * /healthz and /readyz asked every 500 ms over one kept-alive HTTP connection, opened before the
 * test takes the descriptors away (a new connection needs one; a kept-alive one does not), from a
 * worker thread (PROBE_WORKER says why). Each answer's status, or the error, is recorded.
 */
export function keptAliveProbes(hostPort: string) {
  const [host, port] = splitHostPort(hostPort);
  const answers: { path: string; status: number | string }[] = [];
  const worker = new Worker(PROBE_WORKER, { eval: true, workerData: { host, port } });
  worker.on('message', (a: { path: string; status: number | string }) => answers.push(a));
  const exited = once(worker, 'exit');
  return {
    answers,
    /** Answers (of any status) since index `from`, and the errors among them. */
    since(from: number) {
      const got = answers.slice(from);
      return { got, errors: got.filter((a) => typeof a.status === 'string') };
    },
    async stop() {
      worker.postMessage('stop');
      await exited;
    },
  };
}
