/**
 * The loss window of a Redis failover, with and without WAIT (issue #43): how many commits the
 * proxy acknowledged that the promoted replica does not have.
 *
 * The bed: a master M and a replica R that replicates through a relay (the replication link can be
 * cut), the CLI proxy on `redis://<relay P>` where relay P stands for the address clients follow
 * (what Sentinel or a DNS switch gives them): first M, after the failover R. One group commits
 * strictly increasing offsets, one at a time, through the proxy; each acknowledged offset is noted
 * with its time.
 *
 * - `partition`: the replication link is frozen (M is partitioned away from R but still reached
 *   by the proxy, and still accepting writes), commits go on for `partitionMs`, then R is promoted
 *   (REPLICAOF NO ONE) and the proxy's address switched to it, as a failover does while the old
 *   master is cut off.
 * - `kill`: M is SIGKILLed while commits flow, R promoted at once (a plain failover without lag).
 *
 * Lost: acknowledged offsets above what R holds for the group, read from R directly; the window is
 * the time from the first lost acknowledgement to the last. Then one OffsetFetch through the
 * proxy, now on R, shows whether a client reads an offset older than one it was told was committed.
 */
import { rmSync } from 'node:fs';
import { openStore } from '../../backends/open-store.js';
import { waitUntil } from '../bed/process.js';
import { startRedis } from '../bed/redis.js';
import { redisCommand } from '../bed/resp.js';
import { spawnProxy } from '../harness/proxy.js';
import type { ProxyProcess } from '../harness/proxy.js';
import { RawClient } from '../harness/raw-client.js';
import { commitOnce, fetchOnce, sleep } from './commit-checker.js';
import { FaultRelay } from './fault-relay.js';

const HOST = '127.0.0.1';
const PARTITIONS = 2;

export interface FailoverLoss {
  scenario: 'partition' | 'kill';
  wait: boolean;
  /** Commits acknowledged in all, and of those sent while the replication link was cut (partition only). */
  acked: number;
  ackedDuringPartition: number;
  /** Commits answered with an error code or not at all. */
  refused: number;
  /** Acknowledged commits the promoted replica does not have. */
  lost: number;
  /** Time between the first and the last lost acknowledgement, ms. */
  windowMs: number;
  /** The offset a client reads through the proxy after the failover, and the highest acknowledged. */
  fetched: number;
  highestAcked: number;
}

export async function measureFailoverLoss(opts: {
  broker: string;
  topic: string;
  group: string;
  scenario: 'partition' | 'kill';
  wait: boolean;
  partitionMs?: number;
}): Promise<FailoverLoss> {
  const master = await startRedis({ appendfsync: 'always' });
  const link = await FaultRelay.start({ host: HOST, port: master.port });
  const front = await FaultRelay.start({ host: HOST, port: master.port });
  let replica: Awaited<ReturnType<typeof startRedis>> | undefined;
  let proxy: ProxyProcess | undefined;
  let client: RawClient | undefined;
  try {
    replica = await startRedis({
      appendfsync: 'always',
      extraArgs: ['--replicaof', HOST, String(link.port), '--repl-diskless-sync-delay', '0'],
    });
    await waitUntil(
      'the replica to sync',
      async () =>
        (await redisCommand(HOST, replica!.port, 'INFO replication')).includes('master_link_status:up'),
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    const url = `redis://${front.address}${opts.wait ? '?wait=1&waitTimeoutMs=200' : ''}`;
    proxy = await spawnProxy(['--bootstrap-server', opts.broker, '--store', url]);
    client = await RawClient.connect(proxy.bootstrap);
    const acks: { k: number; sentAt: number; at: number }[] = [];
    let refused = 0;
    let k = 0;
    let committing = true;
    let cut = Infinity;
    const loop = (async () => {
      while (committing) {
        k++;
        const sentAt = performance.now();
        try {
          const codes = await commitOnce(client!, opts.group, opts.topic, PARTITIONS, BigInt(k));
          if (codes.every((c) => c === 0)) acks.push({ k, sentAt, at: performance.now() });
          else refused++;
        } catch {
          refused++;
          client!.close();
          client = await RawClient.connect(proxy!.bootstrap);
        }
      }
    })();
    await waitUntil('commits acknowledged', async () => acks.length >= 50, { timeoutMs: 60_000 });
    if (opts.scenario === 'partition') {
      cut = performance.now();
      link.freeze();
      await sleep(opts.partitionMs ?? 2000);
      committing = false;
      await loop;
      await redisCommand(HOST, replica.port, 'REPLICAOF NO ONE');
    } else {
      await master.kill();
      await redisCommand(HOST, replica.port, 'REPLICAOF NO ONE');
      await sleep(500);
      committing = false;
      await loop;
    }
    // Clients follow the new master: the proxy's store connections go to R from now on.
    front.retarget({ host: HOST, port: replica.port });
    front.drop();
    const store = await openStore(replica.url);
    let stored: number;
    try {
      const offsets = await store.fetch(opts.group, null);
      stored = Math.min(...offsets.map((o) => Number(o.offset)), Infinity);
      if (!Number.isFinite(stored)) stored = 0;
    } finally {
      await store.close();
    }
    const lostAcks = acks.filter((a) => a.k > stored);
    // Through the proxy, on R now: retried while its store connection moves over.
    let fetched = -1;
    await waitUntil(
      'an OffsetFetch through the proxy on the promoted replica',
      async () => {
        try {
          const r = await fetchOnce(client!, opts.group, opts.topic, PARTITIONS);
          if (r.errorCode !== 0) return false;
          fetched = Math.min(...[...r.offsets.values()].map(Number));
          return true;
        } catch {
          client!.close();
          client = await RawClient.connect(proxy!.bootstrap);
          return false;
        }
      },
      { timeoutMs: 60_000, intervalMs: 300 },
    );
    return {
      scenario: opts.scenario,
      wait: opts.wait,
      acked: acks.length,
      ackedDuringPartition: acks.filter((a) => a.sentAt > cut).length,
      refused,
      lost: lostAcks.length,
      windowMs: lostAcks.length > 0 ? lostAcks.at(-1)!.at - lostAcks[0]!.at : 0,
      fetched,
      highestAcked: acks.at(-1)?.k ?? 0,
    };
  } finally {
    client?.close();
    await proxy?.stop('SIGKILL');
    await link.close();
    await front.close();
    await Promise.allSettled([master.kill(), replica?.kill()]);
    for (const dir of [master.dataDir, replica?.dataDir])
      if (dir) rmSync(dir, { recursive: true, force: true });
  }
}

export function describeLoss(r: FailoverLoss): string {
  return (
    `${r.scenario === 'partition' ? 'old master partitioned away, still accepting writes' : 'master SIGKILLed, replica promoted'}, ` +
    `${r.wait ? 'wait=1' : 'no WAIT'}: ${r.acked} commits acknowledged (${r.ackedDuringPartition} while cut off), ` +
    `${r.refused} refused; lost ${r.lost} over ${r.windowMs.toFixed(0)} ms; read through the proxy afterwards ` +
    `${r.fetched}, highest acknowledged ${r.highestAcked}`
  );
}
