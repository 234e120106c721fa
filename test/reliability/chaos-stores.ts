/**
 * The stores of the chaos run, each with the handles its faults need: the server process to kill,
 * freeze or fail over, the relays (FaultRelay) the proxies reach it through, and a way to read it
 * directly afterwards (not through the relays, not through a proxy).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EmbeddedStore } from '../../backends/embedded-store.js';
import { openStore } from '../../backends/open-store.js';
import type { OffsetStore } from '../../backends/store.js';
import { startRedis, startRedisCluster, startRedisSentinel } from '../bed/redis.js';
import type { RedisProcess } from '../bed/redis.js';
import { redisCommand } from '../bed/resp.js';
import type { FaultKind, StoreKind } from './chaos-schedule.js';
import { FaultRelay } from './fault-relay.js';
import { RedisNodeRelays } from './redis-node-relays.js';
import { StallDisk } from './stall-disk.js';
import { startSplittableEnsemble } from './zk-split.js';
import { SentinelEvents } from './chaos-store-events.js';

export interface ChaosStore {
  kind: StoreKind;
  /** Flags for each proxy (--store, --data-dir). */
  proxyArgs: string[];
  /** The relays between the proxies and the store (empty where the store's client finds servers itself). */
  relays: FaultRelay[];
  /** SIGKILL of the server that matters (Redis, a Cluster master, the Sentinel master, the ZooKeeper leader); resolves with a restart function. */
  kill(): Promise<() => Promise<void>>;
  /** SIGSTOP of the same server; resolves with the SIGCONT function. */
  freeze(): Promise<() => void>;
  /** A controlled failover (Cluster, Sentinel): a replica promoted. */
  failover?(): Promise<string>;
  /** The relay in front of the master the other faults pick (Cluster, Sentinel), and its port. */
  masterRelay?(): Promise<{ relay: FaultRelay; port: number }>;
  /** Splits the store's ensemble by the network (ZooKeeper: the leader cut off); resolves with the split in words and the heal. */
  split?(): Promise<{ split: string; heal: () => void }>;
  /** Fills the data directory's file system (embedded on a tmpfs); resolves with the function that frees it. */
  fillDisk?(): () => void;
  /** Stalls every write to the data directory (embedded on a FUSE mount); returns the function that releases them. */
  stallDisk?(): () => void;
  /** Watches what the store does on its own (Sentinel's failovers), from outside the proxy. */
  watchEvents?(clock: () => number, log: (line: string) => void): Promise<SentinelEvents>;
  /** Fault kinds this store cannot inject on this machine, each with the reason (the run leaves them out and says so). */
  unavailable: { kind: FaultKind; why: string }[];
  /** The store read directly. */
  openDirect(): Promise<OffsetStore>;
  stop(): Promise<void>;
}

function signal(pid: number | undefined, sig: NodeJS.Signals): void {
  if (pid !== undefined) process.kill(pid, sig);
}

/** SIGCONT for `pid` only while it is still `current()` (a kill meanwhile replaced it). */
function thawer(pid: number | undefined, current: () => number | undefined): () => void {
  return () => {
    if (pid !== undefined && current() === pid) process.kill(pid, 'SIGCONT');
  };
}

async function embedded(): Promise<ChaosStore> {
  // A tmpfs of its own (needs root), so the disk can be filled without touching the machine's,
  // and over it a FUSE loopback (root, /dev/fuse, python3-fusepy) whose writes can be stalled:
  // the data directory is on the FUSE mount, its files on the tmpfs.
  const mount = fs.mkdtempSync(path.join(os.tmpdir(), 'kop-chaos-data-'));
  const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=512m', 'tmpfs', mount], {
    encoding: 'utf8',
  });
  const unavailable: ChaosStore['unavailable'] = [];
  const onTmpfs = mounted.status === 0;
  if (!onTmpfs)
    unavailable.push({
      kind: 'disk-full',
      why: `no tmpfs: ${mounted.stderr.trim() || `mount exited ${mounted.status}`}`,
    });
  let stall: StallDisk | undefined;
  try {
    stall = await StallDisk.mount({ backing: path.join(mount, 'backing') });
  } catch (err) {
    unavailable.push({ kind: 'disk-stall', why: (err as Error).message.split('\n')[0]! });
  }
  const dataDir = path.join(stall?.path ?? mount, 'data');
  fs.mkdirSync(dataDir);
  return {
    kind: 'embedded',
    proxyArgs: ['--data-dir', dataDir],
    relays: [],
    unavailable,
    kill: () => Promise.reject(new Error('the embedded store runs inside the proxy')),
    freeze: () => Promise.reject(new Error('the embedded store runs inside the proxy')),
    ...(onTmpfs ? { fillDisk: () => fillToTheLastPage(path.join(mount, 'filler')) } : {}),
    ...(stall
      ? {
          stallDisk: () => {
            stall.stall();
            return () => stall.release();
          },
        }
      : {}),
    openDirect: async () => new EmbeddedStore({ dataDir }),
    stop: async () => {
      stall?.unmount();
      if (onTmpfs) spawnSync('umount', ['-l', mount]);
      fs.rmSync(mount, { recursive: true, force: true });
    },
  };
}

/** Writes `file` until its file system is full, to the last page; returns the function that frees it. */
function fillToTheLastPage(file: string): () => void {
  const chunk = Buffer.alloc(1024 * 1024, 1);
  const fd = fs.openSync(file, 'w');
  try {
    for (;;) fs.writeSync(fd, chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  }
  // What is left below a megabyte, page by page.
  try {
    for (;;) fs.writeSync(fd, Buffer.alloc(4096, 1));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  } finally {
    fs.closeSync(fd);
  }
  return () => fs.rmSync(file, { force: true });
}

async function redis(): Promise<ChaosStore> {
  const server = await startRedis({ appendfsync: 'always' });
  const relay = await FaultRelay.start({ host: server.host, port: server.port });
  return {
    kind: 'redis',
    proxyArgs: ['--store', `redis://${relay.address}`],
    relays: [relay],
    unavailable: [],
    kill: async () => {
      await server.kill();
      return () => server.start();
    },
    freeze: async () => {
      const pid = server.pid;
      signal(pid, 'SIGSTOP');
      return thawer(pid, () => server.pid);
    },
    openDirect: () => openStore(server.url),
    stop: async () => {
      await relay.close();
      signal(server.pid, 'SIGCONT');
      await server.kill();
      fs.rmSync(server.dataDir, { recursive: true, force: true });
    },
  };
}

/** SIGKILL and SIGSTOP of whichever server `pick` names at the time (the master now). */
function masterFaults(pick: () => Promise<RedisProcess>): Pick<ChaosStore, 'kill' | 'freeze'> {
  return {
    kill: async () => {
      const m = await pick();
      await m.kill();
      return () => m.start();
    },
    freeze: async () => {
      const m = await pick();
      const pid = m.pid;
      signal(pid, 'SIGSTOP');
      return thawer(pid, () => m.pid);
    },
  };
}

async function redisCluster(): Promise<ChaosStore> {
  // Every node behind a relay of its own (the proxies learn the relays' ports from the nodes).
  const nodeRelays = new RedisNodeRelays();
  // An AOF on every node, as the other Redis stores of the run have: a master without one that is
  // killed and restarted before its replica is promoted comes back empty with its slots, and the
  // replica copies the empty set (Redis's own warning against restarting such masters): the
  // store loses its data, whatever the proxy does.
  const cluster = await startRedisCluster({
    replicasPerMaster: 1,
    nodeTimeoutMs: 2000,
    appendfsync: 'always',
    announcePort: nodeRelays.announcePort,
  });
  /** A live master, chosen by the run's order of masters (the first in CLUSTER NODES). */
  const aMaster = async () => {
    const top = await cluster.topology();
    const port = top.find((n) => n.role === 'master' && !n.failing)!.port;
    return cluster.members.find((m) => m.port === port)!;
  };
  return {
    kind: 'redis-cluster',
    proxyArgs: ['--store', cluster.url],
    relays: [],
    unavailable: [],
    ...masterFaults(aMaster),
    failover: async () => {
      const top = await cluster.topology();
      const replica = top.find((n) => n.role === 'replica' && !n.failing && n.masterId !== '');
      if (replica === undefined) return 'no replica to promote';
      return `${replica.port}: ${await redisCommand('127.0.0.1', replica.port, 'CLUSTER FAILOVER')}`;
    },
    masterRelay: async () => {
      const { port } = await aMaster();
      return { relay: nodeRelays.of(port), port };
    },
    // Through the relays (the client learns their ports from the nodes), idle by then.
    openDirect: () => openStore(cluster.url),
    stop: async () => {
      for (const m of cluster.members) signal(m.pid, 'SIGCONT');
      await cluster.stop();
      await nodeRelays.close();
    },
  };
}

async function sentinel(): Promise<ChaosStore> {
  const nodeRelays = new RedisNodeRelays();
  const set = await startRedisSentinel({
    downAfterMs: 1000,
    failoverTimeoutMs: 4000,
    announcePort: nodeRelays.announcePort,
  });
  const master = async () => {
    const port = await set.masterPort();
    return set.data.find((d) => d.port === port)!;
  };
  return {
    kind: 'sentinel',
    proxyArgs: ['--store', set.url],
    relays: [],
    unavailable: [],
    ...masterFaults(master),
    failover: async () =>
      redisCommand('127.0.0.1', set.sentinels[0]!.port, `SENTINEL FAILOVER ${set.masterName}`),
    watchEvents: (clock, log) => SentinelEvents.watch(set.sentinels[0]!.port, clock, log),
    masterRelay: async () => {
      const { port } = await master();
      return { relay: nodeRelays.of(port), port };
    },
    // Through the relays (the sentinels name the relays' ports), idle by then.
    openDirect: () => openStore(set.url),
    stop: async () => {
      for (const d of set.data) signal(d.pid, 'SIGCONT');
      await set.stop();
      await nodeRelays.close();
    },
  };
}

async function zookeeper(): Promise<ChaosStore> {
  // Every link between members through a relay of its own, so the ensemble can be split.
  const ensemble = await startSplittableEnsemble();
  const relays = await Promise.all(
    ensemble.members.map((m) => FaultRelay.start({ host: '127.0.0.1', port: m.port })),
  );
  return {
    kind: 'zk',
    proxyArgs: ['--store', `zk://${relays.map((r) => r.address).join(',')}/kop-chaos`],
    relays,
    unavailable: [],
    kill: async () => {
      const leader = await ensemble.leader();
      await leader.kill();
      return async () => {
        await leader.start();
        await ensemble.settled();
      };
    },
    freeze: async () => {
      const leader = await ensemble.leader();
      const pid = leader.pid;
      signal(pid, 'SIGSTOP');
      return thawer(pid, () => leader.pid);
    },
    split: async () => {
      const leader = await ensemble.leader();
      return { split: ensemble.cut([leader]), heal: () => ensemble.heal() };
    },
    openDirect: () => openStore(`${ensemble.url}/kop-chaos`),
    stop: async () => {
      await Promise.all(relays.map((r) => r.close()));
      await ensemble.stop();
    },
  };
}

export function startChaosStore(kind: StoreKind): Promise<ChaosStore> {
  switch (kind) {
    case 'embedded':
      return embedded();
    case 'redis':
      return redis();
    case 'redis-cluster':
      return redisCluster();
    case 'sentinel':
      return sentinel();
    case 'zk':
      return zookeeper();
  }
}
