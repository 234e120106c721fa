// Issue #7, faults of the offset stores under the CLI proxy: Redis standalone SIGKILLed and
// restarted, a Redis Cluster master and a Sentinel-monitored master killed while their replica
// lags (with and without WAIT), the ZooKeeper store's session expired. In each, CommitChecker
// groups commit through the proxy (test/reliability/store-faults.ts: main groups all along,
// witness groups until just before the fault), and at the end every acknowledged commit must be
// in the store, read directly; meanwhile clients get only retriable codes, never a dropped
// connection, the proxy stays up and its RSS bounded.
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { StoreUnavailableError } from '../../backends/errors.js';
import { openStore } from '../../backends/open-store.js';
import { RedisStore } from '../../backends/redis-store.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { tailFile, waitUntil } from '../bed/process.js';
import { startRedis, startRedisCluster, startRedisSentinel } from '../bed/redis.js';
import type {
  ClusterNodeInfo,
  RedisCluster,
  RedisProcess,
  RedisSentinelSet,
  RedisServer,
} from '../bed/redis.js';
import { redisCommand } from '../bed/resp.js';
import { startZooKeeper } from '../bed/zookeeper.js';
import type { ZooKeeperServer } from '../bed/zookeeper.js';
import { sleep } from '../reliability/commit-checker.js';
import { until } from '../reliability/fault-helpers.js';
import { expectLive, expectSurvived, runStoreFault } from '../reliability/store-faults.js';
import type { FaultContext, StoreFaultResult } from '../reliability/store-faults.js';
import { ZooKeeperRelay, closeSession } from '../reliability/zk-session.js';

const brokerBootstrap = inject('kafkaBootstrap');
const HOST = '127.0.0.1';

const isMaster = async (port: number) =>
  (await redisCommand(HOST, port, 'INFO replication')).includes('role:master');
const synced = async (port: number) =>
  (await redisCommand(HOST, port, 'INFO replication')).includes('master_link_status:up');

const groupNames = (topic: string, kind: string) =>
  Array.from({ length: 4 }, (_, i) => `${topic}-${kind}-${i}`);

describe('Redis standalone (AOF, appendfsync always) killed with SIGKILL and restarted', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedis({ appendfsync: 'always' });
  });
  afterAll(async () => {
    await redis?.kill();
  });

  test('retriable errors while it is down, every group resumes, nothing acknowledged is lost', async () => {
    const topic = uniqueName('redis-kill');
    const r = await runStoreFault({
      name: 'Redis standalone SIGKILL',
      brokerBootstrap,
      store: redis.url,
      topic,
      groups: groupNames(topic, 'main'),
      witnesses: groupNames(topic, 'witness'),
      inject: async (ctx) => {
        await ctx.stopWitnesses();
        await redis.kill();
        ctx.mark('killed');
        await sleep(2_000);
        await redis.start();
        ctx.mark('restarted');
      },
    });
    expectSurvived(r, { errorsExpected: true });
  });
});

describe('Redis wait=1: a resent commit', () => {
  test('answered from its request record on another connection, it is acknowledged only once a replica has it', async () => {
    const master = await startRedis();
    const replica = await startRedis({ extraArgs: ['--replicaof', HOST, String(master.port)] });
    const url = `${master.url}?wait=1&waitTimeoutMs=200`;
    const first = new RedisStore(url, { operationTimeoutMs: 2_000 });
    const second = new RedisStore(url, { operationTimeoutMs: 2_000 });
    const request = {
      group: 'resent',
      requestId: 'resent-1',
      writes: [
        {
          topic: 't',
          partition: 0,
          offset: 7n,
          leaderEpoch: -1,
          metadata: '',
          commitTimestamp: 1n,
          expireTimestamp: -1n,
        },
      ],
    };
    try {
      await waitUntil(
        'the replica to sync',
        async () => !(await isMaster(replica.port)) && (await synced(replica.port)),
        {
          timeoutMs: 30_000,
          intervalMs: 100,
        },
      );
      // Frozen, the replica stays connected but acknowledges nothing new.
      process.kill(replica.pid!, 'SIGSTOP');
      try {
        // Applied on the master only: WAIT finds no replica with it.
        await expect(first.commit(request)).rejects.toBeInstanceOf(StoreUnavailableError);
        // The same request again (a resend) on another connection: the script answers the
        // recorded outcome and writes nothing, so a bare WAIT on that connection would count the
        // frozen replica at once; the PEXPIRE before WAIT makes it wait for the record.
        await expect(second.commit(request)).rejects.toBeInstanceOf(StoreUnavailableError);
      } finally {
        process.kill(replica.pid!, 'SIGCONT');
      }
      await expect(second.commit(request)).resolves.toEqual({ status: 'ok' });
      expect(await redisCommand(HOST, replica.port, 'HGET kop:{g:resent}:offsets t:0')).toMatch(/^7\|/);
    } finally {
      await first.close();
      await second.close();
      await replica.kill();
      await master.kill();
    }
  });
});

/** `error` with each node's replication state and the end of its log. */
async function explained(error: unknown, nodes: RedisProcess[]): Promise<Error> {
  const parts: string[] = [];
  for (const n of nodes) {
    const info = await redisCommand(HOST, n.port, 'INFO replication').catch(() => 'no answer');
    const state = info
      .split('\r\n')
      .filter((l) => /^(role|master_host|master_port|master_link_status|connected_slaves|slave\d)/.test(l))
      .join(' ');
    parts.push(`--- :${n.port} ${state}\n${tailFile(n.logFile, 20)}`);
  }
  return new Error(`${error instanceof Error ? error.message : String(error)}\n${parts.join('\n')}`);
}

/**
 * Cuts a replica off and kills its master: the replica is frozen (SIGSTOP, briefly: less than the
 * failure detection time) and its replication link killed, so the master's next writes reach no
 * replica; the witness groups commit for 300 ms more (acknowledged by the master alone, unless WAIT
 * refuses them; without WAIT until some were acknowledged, at most 3 s more), stop, and the master is SIGKILLed. Then the replica runs again, is promoted, and
 * the old master is started again and resyncs as its replica. The waits allow for a sentinel in
 * TILT mode (30 s without acting, entered when its timer ran more than 2 s late: a loaded machine).
 */
async function failoverWithLaggingReplica(
  ctx: FaultContext,
  t: FailoverTarget,
  witnessesMustCommit: boolean,
): Promise<void> {
  const { master, replica } = t;
  const replicaPid = replica.pid!;
  process.kill(replicaPid, 'SIGSTOP');
  try {
    await redisCommand(HOST, master.port, 'CLIENT KILL TYPE replica');
    ctx.mark('replica cut off');
    const acksAtCut = ctx.witnessAcks();
    await sleep(300);
    if (witnessesMustCommit) {
      // On a loaded machine 300 ms may pass without a witness commit, and then there is nothing
      // to lose. Each witness group is a closed loop: with more acks than two per group, some
      // group's later commit was sent after the cut, so it reached the master alone.
      const deadline = Date.now() + 3_000;
      while (ctx.witnessAcks() - acksAtCut <= 2 * ctx.witnessGroups && Date.now() < deadline) await sleep(20);
    }
    await ctx.stopWitnesses();
    await master.kill();
    ctx.mark('master killed');
  } finally {
    process.kill(replicaPid, 'SIGCONT');
  }
  try {
    await waitUntil('the replica to be promoted', t.promoted, { timeoutMs: 45_000, intervalMs: 100 });
    ctx.mark('replica promoted');
    await master.start();
    await t.rejoin();
    await waitUntil(
      'the old master to resync as a replica',
      async () => !(await isMaster(master.port)) && (await synced(master.port)),
      { timeoutMs: 45_000, intervalMs: 100 },
    );
  } catch (error) {
    throw await explained(error, [master, replica, ...t.observers]);
  }
  ctx.mark('old master resynced as replica');
}

/** With WAIT the run must lose nothing; without, the witnesses' last commits are lost (the point). */
function expectFailoverVerdict(r: StoreFaultResult, wait: boolean, witnesses: string[]): void {
  if (wait) {
    expectSurvived(r, { errorsExpected: true });
    return;
  }
  expectLive(r, { errorsExpected: true });
  // Negative control: acknowledged by the master alone, gone with it. Only witnesses can show it
  // (the main groups' later commits overwrite the loss).
  expect(r.violations.length).toBeGreaterThan(0);
  for (const v of r.violations) {
    expect(witnesses).toContain(v.group);
    expect(v.stored === null || v.stored < v.acked).toBe(true);
  }
}

interface FailoverTarget {
  /** The store URL without options. */
  url: string;
  master: RedisProcess;
  replica: RedisProcess;
  groups: string[];
  witnesses: string[];
  promoted(): Promise<boolean>;
  /** After the old master is started again: what makes it a replica of the promoted one. */
  rejoin(): Promise<void>;
  /** More processes whose logs explain a failure (the sentinels). */
  observers: RedisProcess[];
}

/**
 * A describe block of two tests on one bed shape: the same failover with wait=1 (nothing may be
 * lost) and without WAIT (the negative control).
 */
function failoverTests<Bed extends { stop(): Promise<void> }>(
  kind: 'Cluster' | 'Sentinel',
  start: () => Promise<Bed>,
  target: (bed: Bed, topic: string) => Promise<FailoverTarget>,
): void {
  describe(`Redis ${kind}: a master killed while its replica lags, the replica promoted`, () => {
    let bed: Bed | undefined;
    beforeAll(async () => {
      bed = await start();
    });
    afterAll(async () => {
      await bed?.stop();
    });

    for (const wait of [true, false]) {
      const setting = wait ? 'wait=1 (WAIT for one replica)' : 'no WAIT';
      const verdict = wait
        ? 'nothing acknowledged is lost'
        : 'the commits only the master had are lost (negative control)';
      test(`${setting}: ${verdict}`, async () => {
        const topic = uniqueName(`${kind.toLowerCase()}-${wait ? 'wait' : 'nowait'}`);
        const t = await target(bed!, topic);
        const r = await runStoreFault({
          name: `Redis ${kind} failover, ${setting}`,
          brokerBootstrap,
          store: wait ? `${t.url}?wait=1&waitTimeoutMs=500` : t.url,
          open: () => openStore(t.url),
          topic,
          groups: t.groups,
          witnesses: t.witnesses,
          inject: (ctx) => failoverWithLaggingReplica(ctx, t, !wait),
        });
        expectFailoverVerdict(r, wait, t.witnesses);
      });
    }
  });
}

// The victim: the master that owns the slot of `<topic>-0`; the 8 groups are all on it.
failoverTests(
  'Cluster',
  () => startRedisCluster({ replicasPerMaster: 1, nodeTimeoutMs: 2_000 }),
  async (cluster: RedisCluster, topic) => {
    const live = cluster.members.find((m) => m.pid !== undefined)!;
    const slotOf = async (g: string) =>
      Number((await redisCommand(HOST, live.port, `CLUSTER KEYSLOT kop:{g:${g}}:offsets`)).slice(1));
    const topology = await cluster.topology();
    const ownerOf = (slot: number) =>
      topology.find((n) => n.role === 'master' && n.slots.some(([a, b]) => slot >= a && slot <= b))!;
    const master: ClusterNodeInfo = ownerOf(await slotOf(`${topic}-0`));
    const replica = topology.find((n) => n.masterId === master.id && !n.failing)!;
    const names: string[] = [];
    for (let i = 0; names.length < 8; i++) {
      const g = `${topic}-${i}`;
      if (ownerOf(await slotOf(g)).id === master.id) names.push(g);
    }
    const proc = (port: number) => cluster.members.find((m) => m.port === port)!;
    return {
      url: cluster.url,
      master: proc(master.port),
      replica: proc(replica.port),
      groups: names.slice(0, 4),
      witnesses: names.slice(4),
      promoted: async () =>
        (await redisCommand(HOST, replica.port, 'CLUSTER INFO')).includes('cluster_state:ok') &&
        (await isMaster(replica.port)),
      // The cluster protocol: a returning master whose slots moved becomes the new owner's replica.
      rejoin: async () => undefined,
      observers: [],
    };
  },
);

failoverTests(
  'Sentinel',
  () => startRedisSentinel({ sentinels: 3, downAfterMs: 1_000 }),
  async (sentinel: RedisSentinelSet, topic) => {
    const masterPort = await sentinel.masterPort();
    const master = sentinel.data.find((d) => d.port === masterPort)!;
    const replica = sentinel.data.find((d) => d.port !== masterPort)!;
    return {
      url: sentinel.url,
      master,
      replica,
      groups: groupNames(topic, 'main'),
      witnesses: groupNames(topic, 'witness'),
      promoted: async () => (await sentinel.masterPort()) === replica.port && (await isMaster(replica.port)),
      // As an orchestrator would start it. Sentinel converts a returning old master by itself
      // only after 8 s (and not while in TILT mode).
      rejoin: async () => {
        await redisCommand(HOST, master.port, `REPLICAOF ${HOST} ${replica.port}`);
      },
      observers: sentinel.sentinels,
    };
  },
);

describe('ZooKeeper store: the session expired mid-run', () => {
  let zk: ZooKeeperServer;
  let relay: ZooKeeperRelay;
  beforeAll(async () => {
    zk = await startZooKeeper();
    relay = await ZooKeeperRelay.start({ host: HOST, port: Number(zk.connectString.split(':')[1]) });
  });
  afterAll(async () => {
    await relay?.close();
    await zk?.stop();
  });

  test('the store opens a new session, commits resume, nothing acknowledged is lost', async () => {
    const topic = uniqueName('zk-expiry');
    const target = { host: HOST, port: Number(zk.connectString.split(':')[1]) };
    let expiredSession = 0n;
    const r = await runStoreFault({
      name: 'ZooKeeper session expiry',
      brokerBootstrap,
      store: relay.url,
      open: () => openStore(zk.url),
      topic,
      groups: groupNames(topic, 'main'),
      witnesses: groupNames(topic, 'witness'),
      inject: async (ctx) => {
        await ctx.stopWitnesses();
        const session = relay.lastSession()!;
        expiredSession = session.session;
        // Held off while its session is closed, so the proxy cannot resume it in between; short,
        // under the 1 s store deadline (two timed-out operations would make the store replace its
        // client for that reason instead).
        relay.sever();
        ctx.mark('proxy cut off from ZooKeeper');
        await closeSession(target, session.session, session.password);
        ctx.mark('session closed by a second client');
        await sleep(300);
        relay.restore();
        await until(
          () => relay.expiredAnswers().length > 0,
          'ZooKeeper to tell the proxy its session expired',
          10_000,
        );
        ctx.mark('proxy told "expired"');
      },
    });
    const after = relay.lastSession();
    console.log(
      `[faults] ZooKeeper session expiry: session 0x${expiredSession.toString(16)} closed, ` +
        `${relay.expiredAnswers().length} resume(s) answered "expired", now on session 0x${after?.session.toString(16)}; ` +
        `${relay.handshakes.length} handshakes in all`,
    );
    expect(after?.session).not.toBe(expiredSession);
    expectSurvived(r, { errorsExpected: false });
  });
});
