// Starts the proxy for a test: in-process (KafkaProxy) or as the real CLI child process, on a
// bootstrap port whose broker ports (port + 1 + node id) are free too.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ClusterClient } from '../../proxy/client/cluster-client.js';
import { BrokerMap, parseHostPortList } from '../../proxy/core/broker-map.js';
import type { HostPort } from '../../proxy/core/broker-map.js';
import type { UpstreamTls } from '../../proxy/core/upstream-socket.js';
import { RELAY_DEFAULTS } from '../../proxy/core/defaults.js';
import { randomFixedPort } from '../bed/ports.js';
import { removeScratch, scratchDir } from './scratch.js';
import type { ProxyExtension } from '../../proxy/core/extension.js';
import { createLogger } from '../../proxy/logger.js';
import { KafkaProxy } from '../../proxy/core/server.js';
import type { ProxyOptions } from '../../proxy/core/proxy-options.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen({ host: '127.0.0.1', port }, () => s.close(() => resolve(true)));
  });
}

/** A bootstrap port P with P..P+span free, chosen at random below the ephemeral ports (randomFixedPort). */
export async function freePortRange(span = 8): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = randomFixedPort(span);
    let ok = true;
    for (let p = base; p <= base + span && ok; p++) ok = await portFree(p);
    if (ok) return base;
  }
  throw new Error('no free port range');
}

/**
 * The cluster's brokers as the CLI learns them (its cluster client's Metadata), through a client
 * of its own that is closed again: an in-process proxy has no offset service to lend one.
 */
async function discoverBrokersAt(
  bootstrapServers: HostPort[],
  tls: UpstreamTls | null,
  timeoutMs: number,
): Promise<{ nodeId: number; address: HostPort }[]> {
  const cluster = new ClusterClient({ bootstrapServers, brokers: new BrokerMap(0), tls, timeoutMs });
  try {
    const { brokers } = await cluster.metadata([]);
    return brokers.map((b) => ({ nodeId: b.nodeId, address: { host: b.host, port: b.port } }));
  } finally {
    cluster.close();
  }
}

export interface RunningProxy {
  proxy: KafkaProxy;
  bootstrap: string;
  port: number;
  stop(): Promise<void>;
}

export async function startProxy(
  bootstrapServers: string,
  opts: Partial<ProxyOptions> & { extension?: ProxyExtension | null; brokerSpan?: number } = {},
): Promise<RunningProxy> {
  const port = await freePortRange(opts.brokerSpan ?? 8);
  const servers = parseHostPortList(bootstrapServers);
  const proxy = new KafkaProxy({
    bootstrapServers: servers,
    listen: { host: '127.0.0.1', port },
    log: process.env['KOP_TEST_LOG'] ? createLogger('debug') : undefined,
    discoverBrokers: () =>
      discoverBrokersAt(
        servers,
        opts.brokerTls ?? null,
        opts.requestTimeoutMs ?? RELAY_DEFAULTS.requestTimeoutMs,
      ),
    ...opts,
  });
  await proxy.start();
  return { proxy, bootstrap: `127.0.0.1:${port}`, port, stop: () => proxy.stop() };
}

export interface ProxyProcess {
  child: ChildProcess;
  bootstrap: string;
  port: number;
  /** The data directory made for it (when the test gave none): removed when the proxy exits. */
  dataDir: string | undefined;
  output(): string;
  /** Sends SIGTERM and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Runs the built CLI (`bin/kafka-offset-proxy.js`, needs `npm run build`) as a child process. */
export async function spawnProxy(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  /** Options for node itself, e.g. --cpu-prof (not allowed in NODE_OPTIONS). */
  nodeArgs: string[] = [],
  /** Another checkout's built CLI, for benchmarks that compare two builds in one run. */
  bin = path.join(repo, 'bin/kafka-offset-proxy.js'),
  /** A command that execs node (its pid stays the proxy's), e.g. setpriv dropping a capability. */
  launcher: string[] = [],
): Promise<ProxyProcess> {
  const port = await freePortRange();
  // The embedded store's default directory is relative to the working directory: a test gets its
  // own, which goes with the proxy (it is the proxy's alone: the test never learns its path).
  const dataDir =
    args.includes('--data-dir') ||
    args.some((a) => a.startsWith('embedded:')) ||
    env['KOP_DATA_DIR'] !== undefined
      ? undefined
      : scratchDir('kop-cli-data');
  const command = [
    ...launcher,
    process.execPath,
    ...nodeArgs,
    bin,
    '--listen',
    `127.0.0.1:${port}`,
    ...(dataDir ? ['--data-dir', dataDir] : []),
    ...args,
  ];
  const child = spawn(command[0]!, command.slice(1), {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      if (dataDir !== undefined) removeScratch(dataDir);
      resolve(code);
    }),
  );
  // Generous: at a load average of 40, of five proxies started at once (the store-outage tests),
  // two took longer than 20 s to listen.
  const deadline = Date.now() + 60_000;
  while (!out.includes('"listening"')) {
    if (child.exitCode !== null) throw new Error(`proxy exited with ${child.exitCode}:\n${out}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`proxy did not start listening:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    child,
    bootstrap: `127.0.0.1:${port}`,
    port,
    dataDir,
    output: () => out,
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null) child.kill(signal);
      return exited;
    },
  };
}

/**
 * Builds the CLI (`npm run build`) unless dist/ is newer than every source file of the proxy and
 * the protocol, so a CLI test never runs stale code.
 */
export async function ensureBuilt(): Promise<void> {
  const fs = await import('node:fs');
  const built = path.join(repo, 'dist/proxy/cli.js');
  const newest = (dir: string): number => {
    let max = 0;
    for (const entry of fs.readdirSync(path.join(repo, dir), { withFileTypes: true, recursive: true })) {
      // The native relay's C source too: `npm run build` compiles it into dist/native/.
      if (entry.isFile() && (entry.name.endsWith('.ts') || entry.name.endsWith('.c'))) {
        max = Math.max(max, fs.statSync(path.join(entry.parentPath, entry.name)).mtimeMs);
      }
    }
    return max;
  };
  const builtAt = fs.existsSync(built) ? fs.statSync(built).mtimeMs : 0;
  if (builtAt > Math.max(newest('proxy'), newest('protocol'), newest('backends'))) return;
  const { execFileSync } = await import('node:child_process');
  execFileSync('npm', ['run', 'build', '--silent'], { cwd: repo, stdio: 'pipe' });
}
