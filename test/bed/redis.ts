// Real redis-server processes: a standalone server with AOF, and a 3-master Redis Cluster.

import fs from 'node:fs';
import path from 'node:path';
import { freePort, freePortWithCompanion } from './ports.js';
import { makeRunDir, removeRunDir, runToCompletion, spawnManaged, waitUntil } from './process.js';
import type { ManagedProcess } from './process.js';
import { redisCommand } from './resp.js';

const HOST = '127.0.0.1';
const REDIS_SERVER = process.env['KOP_REDIS_SERVER'] ?? 'redis-server';
const REDIS_CLI = process.env['KOP_REDIS_CLI'] ?? 'redis-cli';

export interface RedisServer {
  host: string;
  port: number;
  /** redis://127.0.0.1:port */
  url: string;
  dataDir: string;
  /** SIGTERM: Redis shuts down cleanly (flushes the AOF). */
  stop(): Promise<void>;
  /** SIGKILL: a crash; only what the AOF already holds survives. */
  kill(): Promise<void>;
  /** Starts again on the same port and data directory. */
  start(): Promise<void>;
  /** Pid of the running server (undefined while stopped), for tests that check cleanup. */
  readonly pid: number | undefined;
}

export interface RedisCluster {
  nodes: { host: string; port: number }[];
  /** redis+cluster://h:p,h:p,h:p */
  url: string;
  stop(): Promise<void>;
}

function serverArgs(port: number, dataDir: string, extra: string[]): string[] {
  return [
    '--port',
    String(port),
    '--bind',
    HOST,
    '--dir',
    dataDir,
    '--daemonize',
    'no',
    '--protected-mode',
    'no',
    '--logfile',
    '', // to stdout, which goes to the log file
    '--save',
    '', // no RDB snapshots: persistence under test is the AOF
    ...extra,
  ];
}

async function waitForPong(proc: ManagedProcess, port: number, what: string): Promise<void> {
  // While it loads the AOF, Redis answers -LOADING; only +PONG means ready.
  await waitUntil(what, async () => (await redisCommand(HOST, port, 'PING')) === '+PONG', {
    timeoutMs: 30_000,
    intervalMs: 50,
    proc,
  });
}

export async function startRedis(
  opts: {
    appendfsync?: 'always' | 'everysec' | 'no';
    /** more `--name value` server options */ extraArgs?: string[];
  } = {},
): Promise<RedisServer> {
  const dataDir = makeRunDir('redis');
  const port = await freePort();
  const logFile = path.join(dataDir, 'redis.log');
  const args = serverArgs(port, dataDir, [
    '--appendonly',
    'yes',
    '--appendfsync',
    opts.appendfsync ?? 'always',
    ...(opts.extraArgs ?? []),
  ]);
  let proc: ManagedProcess | undefined;

  const start = async () => {
    if (proc && !proc.exitStatus) return;
    proc = spawnManaged({
      name: `redis-server :${port}`,
      command: REDIS_SERVER,
      args,
      logFile,
      cwd: dataDir,
    });
    await waitForPong(proc, port, `redis-server on port ${port} to answer PING`);
  };
  await start();

  return {
    host: HOST,
    port,
    url: `redis://${HOST}:${port}`,
    dataDir,
    get pid() {
      return proc && !proc.exitStatus ? proc.pid : undefined;
    },
    async stop() {
      await proc?.stop({ timeoutMs: 10_000 });
    },
    async kill() {
      await proc?.kill();
    },
    start,
  };
}

export async function startRedisCluster(): Promise<RedisCluster> {
  const dir = makeRunDir('redis-cluster');
  const ports: number[] = [];
  // Each node also listens on its cluster bus port, P + 10000.
  for (let i = 0; i < 3; i++) ports.push(await freePortWithCompanion(10_000));
  const procs: ManagedProcess[] = [];
  const stop = async () => {
    await Promise.all(procs.map((p) => p.kill()));
    removeRunDir(dir);
  };
  try {
    await Promise.all(
      ports.map(async (port) => {
        const nodeDir = path.join(dir, `node-${port}`);
        fs.mkdirSync(nodeDir, { recursive: true });
        const proc = spawnManaged({
          name: `redis-server cluster node :${port}`,
          command: REDIS_SERVER,
          args: serverArgs(port, nodeDir, [
            '--cluster-enabled',
            'yes',
            '--cluster-config-file',
            path.join(nodeDir, 'nodes.conf'),
            '--cluster-node-timeout',
            '5000',
            '--appendonly',
            'no',
          ]),
          logFile: path.join(dir, `redis-${port}.log`),
          cwd: dir,
        });
        procs.push(proc);
        await waitForPong(proc, port, `redis cluster node on port ${port} to answer PING`);
      }),
    );
    await runToCompletion({
      name: 'redis-cli --cluster create',
      command: REDIS_CLI,
      args: [
        '--cluster',
        'create',
        ...ports.map((p) => `${HOST}:${p}`),
        '--cluster-replicas',
        '0',
        '--cluster-yes',
      ],
      logFile: path.join(dir, 'cluster-create.log'),
      timeoutMs: 60_000,
    });
    for (const [i, port] of ports.entries()) {
      await waitUntil(
        `redis cluster node ${port} to report cluster_state:ok`,
        async () => (await redisCommand(HOST, port, 'CLUSTER INFO')).includes('cluster_state:ok'),
        { timeoutMs: 30_000, intervalMs: 100, proc: procs[i]! },
      );
    }
  } catch (error) {
    await stop();
    throw error;
  }
  const nodes = ports.map((port) => ({ host: HOST, port }));
  return {
    nodes,
    url: `redis+cluster://${nodes.map((n) => `${n.host}:${n.port}`).join(',')}`,
    stop,
  };
}
