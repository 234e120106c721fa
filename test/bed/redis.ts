// Real redis-server processes: a standalone server with AOF, a Redis Cluster (3 masters, optionally
// with replicas), and a Sentinel set (a master, a replica and sentinels).

import fs from 'node:fs';
import path from 'node:path';
import { freePort, freePortWithCompanion } from './ports.js';
import { makeRunDir, removeRunDir, runToCompletion, spawnManaged, waitUntil } from './process.js';
import type { ManagedProcess } from './process.js';
import { redisCommand } from './resp.js';

const HOST = '127.0.0.1';
const REDIS_SERVER = process.env['KOP_REDIS_SERVER'] ?? 'redis-server';
const REDIS_CLI = process.env['KOP_REDIS_CLI'] ?? 'redis-cli';
/** Valkey 8 (Debian's bookworm-backports): the bed's server with WAITAOF, which Redis 7.0 lacks. */
const VALKEY_SERVER = process.env['KOP_VALKEY_SERVER'] ?? 'valkey-server';

/** One redis-server (or sentinel) process on a fixed port and directory. */
export interface RedisProcess {
  host: string;
  port: number;
  /** SIGTERM: Redis shuts down cleanly (flushes the AOF). */
  stop(): Promise<void>;
  /** SIGKILL: a crash; only what the AOF already holds survives. */
  kill(): Promise<void>;
  /** Starts again on the same port, data directory and options. */
  start(): Promise<void>;
  /** Pid of the running server (undefined while stopped), for tests that check cleanup. */
  readonly pid: number | undefined;
  /** Its stdout and stderr (the server's log), across restarts. */
  logFile: string;
}

export interface RedisServer extends RedisProcess {
  /** redis://127.0.0.1:port */
  url: string;
  dataDir: string;
}

export interface RedisCluster {
  /**
   * Every node, masters and replicas, in start order (roles change with failovers: see topology());
   * with `busAnnouncePort`, the loopback address each node's outgoing connections come from.
   */
  nodes: { host: string; port: number; sourceAddress?: string }[];
  /** The same nodes as processes that can be killed and started again. */
  members: RedisProcess[];
  /** redis+cluster://h:p,h:p,h:p (the announced ports) */
  url: string;
  /** The cluster as a live node sees it (CLUSTER NODES). */
  topology(): Promise<ClusterNodeInfo[]>;
  /**
   * Waits until every node agrees: cluster_state:ok, every node known and none flagged failing,
   * three masters, each replica synced to the master every node names. After a failover and a
   * rejoin the nodes' views converge over a few gossip rounds; a test that reads topology() before
   * then can see a master without its replica.
   */
  settled(timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

export interface ClusterNodeInfo {
  id: string;
  /** The node's own port (with relays: the process's, not the announced relay's). */
  port: number;
  role: 'master' | 'replica';
  /** Flagged as failing (fail or fail?). */
  failing: boolean;
  /** Flagged FAIL: a majority of masters agreed (not only this node's PFAIL, fail?). */
  failed: boolean;
  /** The node id of its master ('' for a master). */
  masterId: string;
  /** Slot ranges it serves, inclusive. */
  slots: [number, number][];
}

export interface RedisSentinelSet {
  /** The master name the sentinels monitor. */
  masterName: string;
  /** The data nodes: data[0] starts as the master, data[1] as its replica. */
  data: RedisServer[];
  sentinels: RedisProcess[];
  /** redis+sentinel://s1,s2,s3/<masterName> */
  url: string;
  /**
   * Port of the data node the live sentinels name as the master (its own port, also with relays);
   * throws while they disagree.
   */
  masterPort(): Promise<number>;
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

/** A redis-server with fixed arguments that can be stopped, killed and started again. */
async function launch(
  name: string,
  port: number,
  cwd: string,
  args: string[],
  command = REDIS_SERVER,
): Promise<RedisProcess> {
  let proc: ManagedProcess | undefined;
  const logFile = path.join(cwd, `redis-${port}.log`);
  const start = async () => {
    if (proc && !proc.exitStatus) return;
    proc = spawnManaged({ name: `${name} :${port}`, command, args, logFile, cwd });
    await waitForPong(proc, port, `${name} on port ${port} to answer PING`);
  };
  await start();
  return {
    host: HOST,
    port,
    logFile,
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

function aofArgs(appendfsync: 'always' | 'everysec' | 'no'): string[] {
  return ['--appendonly', 'yes', '--appendfsync', appendfsync];
}

export async function startRedis(
  opts: {
    appendfsync?: 'always' | 'everysec' | 'no';
    /** more `--name value` server options */ extraArgs?: string[];
    /** valkey-server instead of redis-server (same options and protocol). */
    server?: 'redis' | 'valkey';
  } = {},
): Promise<RedisServer> {
  const dataDir = makeRunDir('redis');
  const port = await freePort();
  const args = serverArgs(port, dataDir, [
    ...aofArgs(opts.appendfsync ?? 'always'),
    ...(opts.extraArgs ?? []),
  ]);
  const valkey = opts.server === 'valkey';
  const server = valkey
    ? await launch('valkey-server', port, dataDir, args, VALKEY_SERVER)
    : await launch('redis-server', port, dataDir, args);
  return Object.assign(server, { url: `redis://${HOST}:${port}`, dataDir });
}

/**
 * Puts something (a test's fault relay) in front of a node's client port: given the port the node
 * listens on, returns the port the node announces instead, so that clients which learn addresses
 * from the servers (a Cluster client's CLUSTER SLOTS, a Sentinel client's master address) only ever
 * connect there. Nodes keep their direct links: the cluster bus, and a Sentinel replica's first
 * replication link.
 */
export type AnnouncePort = (port: number) => Promise<number>;

/** Parses CLUSTER NODES; `realPort` maps an announced port back to the node's own. */
export function parseClusterNodes(
  text: string,
  realPort: (port: number) => number = (p) => p,
): ClusterNodeInfo[] {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const [id, address, flags, master, , , , , ...slots] = line.trim().split(' ');
      const flagList = (flags ?? '').split(',');
      return {
        id: id!,
        port: realPort(Number(/:(\d+)@/.exec(address ?? '')?.[1])),
        role: flagList.includes('master') ? ('master' as const) : ('replica' as const),
        failing: flagList.includes('fail') || flagList.includes('fail?'),
        failed: flagList.includes('fail'),
        masterId: master === '-' ? '' : (master ?? ''),
        slots: slots
          .filter((s) => !s.startsWith('['))
          .map((s) => {
            const [from, to] = s.split('-').map(Number);
            return [from!, to ?? from!] as [number, number];
          }),
      };
    });
}

export async function startRedisCluster(
  opts: {
    /** Replicas per master (default 0: 3 nodes; 1: 6 nodes). */
    replicasPerMaster?: number;
    /** cluster-node-timeout: how long a node may be unreachable before a failover (default 5000). */
    nodeTimeoutMs?: number;
    /** AOF on every node with this fsync policy (default: no AOF, as the failover tests need). */
    appendfsync?: 'always' | 'everysec' | 'no';
    /** Each node announces the port this gives for its own (default: none, nodes announce their own). */
    announcePort?: AnnouncePort;
    /**
     * The same for each node's cluster bus port (default: none, the bus is direct). Each node then
     * also connects out from a loopback address of its own (127.0.0.11, .12, ...: `bind-source-addr`),
     * so what sits in front of a bus port can tell which peer a connection comes from.
     */
    busAnnouncePort?: AnnouncePort;
  } = {},
): Promise<RedisCluster> {
  const replicas = opts.replicasPerMaster ?? 0;
  const dir = makeRunDir('redis-cluster');
  const ports: number[] = [];
  // Each node also listens on its cluster bus port, P + 10000.
  for (let i = 0; i < 3 * (1 + replicas); i++) ports.push(await freePortWithCompanion(10_000));
  const announced = new Map<number, number>();
  for (const port of ports) announced.set(port, opts.announcePort ? await opts.announcePort(port) : port);
  const busAnnounced = new Map<number, number>();
  for (const port of ports)
    busAnnounced.set(port, opts.busAnnouncePort ? await opts.busAnnouncePort(port + 10_000) : port + 10_000);
  // The whole of 127.0.0.0/8 is loopback on Linux: no interface to set up.
  const sourceAddress = (port: number) =>
    opts.busAnnouncePort ? `127.0.0.${11 + ports.indexOf(port)}` : undefined;
  const realPort = (port: number) => ports.find((p) => announced.get(p) === port) ?? port;
  const members: RedisProcess[] = [];
  const stop = async () => {
    await Promise.all(members.map((m) => m.kill()));
    removeRunDir(dir);
  };
  const topologyFrom = async (port: number) =>
    parseClusterNodes(await redisCommand(HOST, port, 'CLUSTER NODES'), realPort);
  const settled = async (timeoutMs: number) => {
    for (const port of ports) {
      await waitUntil(
        `redis cluster node ${port} to report cluster_state:ok and see ${ports.length} healthy nodes`,
        async () => {
          if (!(await redisCommand(HOST, port, 'CLUSTER INFO')).includes('cluster_state:ok')) return false;
          const nodes = await topologyFrom(port);
          const masters = nodes.filter((n) => n.role === 'master');
          return (
            nodes.length === ports.length &&
            masters.length === 3 &&
            nodes.every((n) => !n.failing) &&
            nodes.every((n) => n.role === 'master' || masters.some((m) => m.id === n.masterId))
          );
        },
        { timeoutMs, intervalMs: 100 },
      );
    }
    if (replicas > 0) {
      // A replica counts for WAIT only once its initial sync is done.
      for (const node of (await topologyFrom(ports[0]!)).filter((n) => n.role === 'replica')) {
        await waitUntil(
          `redis cluster replica ${node.port} to sync`,
          async () =>
            (await redisCommand(HOST, node.port, 'INFO replication')).includes('master_link_status:up'),
          { timeoutMs, intervalMs: 100 },
        );
      }
    }
  };
  try {
    members.push(
      ...(await Promise.all(
        ports.map(async (port) => {
          const nodeDir = path.join(dir, `node-${port}`);
          fs.mkdirSync(nodeDir, { recursive: true });
          return launch(
            'redis-server cluster node',
            port,
            nodeDir,
            serverArgs(port, nodeDir, [
              '--cluster-enabled',
              'yes',
              '--cluster-config-file',
              path.join(nodeDir, 'nodes.conf'),
              '--cluster-node-timeout',
              String(opts.nodeTimeoutMs ?? 5000),
              ...(opts.appendfsync ? aofArgs(opts.appendfsync) : ['--appendonly', 'no']),
              // A restarted node resyncs at once instead of waiting 5 s for more replicas.
              '--repl-diskless-sync-delay',
              '0',
              ...(opts.announcePort || opts.busAnnouncePort
                ? [
                    '--cluster-announce-ip',
                    HOST,
                    '--cluster-announce-port',
                    String(announced.get(port)),
                    // Without busAnnouncePort the bus stays direct: nodes gossip and fail over as
                    // without the relays.
                    '--cluster-announce-bus-port',
                    String(busAnnounced.get(port)),
                  ]
                : []),
              ...(opts.busAnnouncePort ? ['--bind-source-addr', sourceAddress(port)!] : []),
            ]),
          );
        }),
      )),
    );
    await runToCompletion({
      name: 'redis-cli --cluster create',
      command: REDIS_CLI,
      args: [
        '--cluster',
        'create',
        ...ports.map((p) => `${HOST}:${p}`),
        '--cluster-replicas',
        String(replicas),
        '--cluster-yes',
      ],
      logFile: path.join(dir, 'cluster-create.log'),
      timeoutMs: 60_000,
    });
    await settled(30_000);
  } catch (error) {
    await stop();
    throw error;
  }
  const nodes = ports.map((port) => ({ host: HOST, port, sourceAddress: sourceAddress(port) }));
  return {
    nodes,
    members,
    url: `redis+cluster://${ports.map((p) => `${HOST}:${announced.get(p)}`).join(',')}`,
    async topology() {
      let lastError: unknown;
      for (const m of members.filter((m) => m.pid !== undefined)) {
        try {
          return await topologyFrom(m.port);
        } catch (error) {
          lastError = error;
        }
      }
      throw new Error(`no live cluster node answered CLUSTER NODES: ${String(lastError)}`);
    },
    settled: (timeoutMs = 30_000) => settled(timeoutMs),
    stop,
  };
}

/** INFO sentinel's line for `name`: "master0:name=kop,status=ok,address=127.0.0.1:P,slaves=1,sentinels=3". */
async function sentinelView(port: number, name: string): Promise<Record<string, string>> {
  const info = await redisCommand(HOST, port, 'INFO sentinel');
  const line = info.split('\r\n').find((l) => l.includes(`name=${name},`));
  if (line === undefined) throw new Error(`sentinel :${port} does not monitor ${name}`);
  return Object.fromEntries(
    line
      .slice(line.indexOf(':') + 1)
      .split(',')
      .map((kv) => kv.split('=') as [string, string]),
  );
}

/**
 * A master, a replica and `sentinels` sentinels (quorum: a majority) monitoring them. The data nodes
 * keep an AOF (`appendfsync always`); a failover starts `downAfterMs` after the master stops
 * answering.
 */
export async function startRedisSentinel(
  opts: {
    sentinels?: number;
    downAfterMs?: number;
    failoverTimeoutMs?: number;
    /** Every data node and sentinel announces the port this gives for its own (default: none). */
    announcePort?: AnnouncePort;
  } = {},
): Promise<RedisSentinelSet> {
  const masterName = 'kop';
  const count = opts.sentinels ?? 3;
  const dir = makeRunDir('redis-sentinel');
  const data: RedisServer[] = [];
  const sentinels: RedisProcess[] = [];
  const announced = new Map<number, number>();
  const announce = async (port: number) => {
    announced.set(port, opts.announcePort ? await opts.announcePort(port) : port);
    return announced.get(port)!;
  };
  const realPort = (port: number) => [...announced].find(([, a]) => a === port)?.[0] ?? port;
  const stop = async () => {
    await Promise.all([...sentinels, ...data].map((p) => p.kill()));
    removeRunDir(dir);
  };
  try {
    for (let i = 0; i < 2; i++) {
      const port = await freePort();
      const dataDir = path.join(dir, `data-${port}`);
      fs.mkdirSync(dataDir, { recursive: true });
      // Direct: a relay in front of the master cuts its clients and sentinels, not this link
      // (after a failover the sentinels point replicas at the announced addresses).
      const replicaOf = i === 0 ? [] : ['--replicaof', HOST, String(data[0]!.port)];
      const announcedPort = await announce(port);
      const args = serverArgs(port, dataDir, [
        ...aofArgs('always'),
        '--repl-diskless-sync-delay',
        '0',
        ...replicaOf,
        ...(opts.announcePort
          ? ['--replica-announce-ip', HOST, '--replica-announce-port', String(announcedPort)]
          : []),
      ]);
      const server = await launch('redis-server (sentinel set)', port, dataDir, args);
      data.push(Object.assign(server, { url: `redis://${HOST}:${port}`, dataDir }));
    }
    await waitUntil(
      'the replica to sync',
      async () =>
        (await redisCommand(HOST, data[1]!.port, 'INFO replication')).includes('master_link_status:up'),
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    const quorum = Math.floor(count / 2) + 1;
    for (let i = 0; i < count; i++) {
      const port = await freePort();
      const sentinelDir = path.join(dir, `sentinel-${port}`);
      fs.mkdirSync(sentinelDir, { recursive: true });
      // A sentinel rewrites its configuration file (the state it learns): one writable file each.
      const conf = path.join(sentinelDir, 'sentinel.conf');
      const announcedPort = await announce(port);
      fs.writeFileSync(
        conf,
        [
          `port ${port}`,
          `bind ${HOST}`,
          'daemonize no',
          'protected-mode no',
          `dir ${sentinelDir}`,
          'logfile ""',
          ...(opts.announcePort
            ? [`sentinel announce-ip ${HOST}`, `sentinel announce-port ${announcedPort}`]
            : []),
          `sentinel monitor ${masterName} ${HOST} ${announced.get(data[0]!.port)} ${quorum}`,
          `sentinel down-after-milliseconds ${masterName} ${opts.downAfterMs ?? 1000}`,
          `sentinel failover-timeout ${masterName} ${opts.failoverTimeoutMs ?? 4000}`,
          `sentinel parallel-syncs ${masterName} 1`,
          '',
        ].join('\n'),
      );
      sentinels.push(await launch('redis-sentinel', port, sentinelDir, [conf, '--sentinel']));
    }
    for (const s of sentinels) {
      await waitUntil(
        `sentinel :${s.port} to know the replica and the other sentinels`,
        async () => {
          const v = await sentinelView(s.port, masterName);
          return v['status'] === 'ok' && v['slaves'] === '1' && v['sentinels'] === String(count);
        },
        { timeoutMs: 30_000, intervalMs: 200 },
      );
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    masterName,
    data,
    sentinels,
    url: `redis+sentinel://${sentinels.map((s) => `${HOST}:${announced.get(s.port)}`).join(',')}/${masterName}`,
    async masterPort() {
      const ports = await Promise.all(
        sentinels
          .filter((s) => s.pid !== undefined)
          .map(async (s) => /:(\d+)$/.exec((await sentinelView(s.port, masterName))['address'] ?? '')?.[1]),
      );
      if (ports.length === 0 || ports.some((p) => p !== ports[0]))
        throw new Error(`the sentinels do not agree on the master: ${ports.join(', ')}`);
      return realPort(Number(ports[0]));
    },
    stop,
  };
}
