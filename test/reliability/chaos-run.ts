/**
 * The chaos run (issue #43): load and real consumer groups through two proxy instances (one on the
 * embedded store: it has one writer) while a seeded schedule injects overlapping faults; then a
 * checker that keeps its own record reads everything back.
 *
 *   npm run chaos-run -- --store embedded|redis|redis-cluster|sentinel|zk [--minutes 5] [--seed 1]
 *     [--connections 300] [--rate 3000] [--fault-every 20] [--min-fault 3] [--max-fault 12]
 *     [--records 100] [--consumers 1] [--store-query wait=1] [--json file]
 *
 * The load: `connections` raw connections (load-run.ts's generator) split over the proxies, each
 * committing 5 partitions of its 2 groups in turn, `rate` partition commits/s in all, with an
 * OffsetFetch after every 20th commit checked against what was acknowledged before it. The
 * consumers (chaos-consumers.ts): a classic and a KIP-848 Java consumer and a librdkafka consumer,
 * each in its own group through a proxy, a classic one directly on the broker as the reference,
 * on a topic a producer writes `records`/s to, directly. The faults (chaos-schedule.ts,
 * chaos-faults.ts) start at random with a mean gap of `fault-every` seconds; none in the first
 * 15 s or the last quarter of the run.
 *
 * Exit code 0 when: no acknowledged commit is missing from the store read directly or through a
 * new proxy, no OffsetFetch answered older than an acknowledged commit, every record the producer
 * had acknowledged was consumed by every group with duplicates only at or above the group's last
 * acknowledged commit of that partition, no proxy was unready outside a fault (plus 15 s) once the
 * run was warmed up (chaos-warmup.ts: within 180 s; its unready time is reported), and every
 * fault could be injected. Prints a table per fault and per consumer group, then one RESULT
 * line, then the JSON of the whole result.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { createTopics } from '../bed/clients/kafkajs.js';
import { kafkaClasspath, startKafka } from '../bed/kafka.js';
import type { KafkaCluster } from '../bed/kafka.js';
import { ensureBuilt } from '../harness/proxy.js';
import { splitHostPort } from '../harness/raw-client.js';
import { faultTableAndVerdict } from './chaos-report.js';
import type { ChaosResult } from './chaos-report.js';
import { ChaosGroup, ProducedRecords, runProducer } from './chaos-consumers.js';
import type { ConsumerKind } from './chaos-consumers.js';
import { runFault } from './chaos-faults.js';
import type { FaultRecord } from './chaos-faults.js';
import { sentinelFaults } from './chaos-store-events.js';
import type { SentinelEvents } from './chaos-store-events.js';
import { ChaosProxy } from './chaos-proxy.js';
import { faultSchedule } from './chaos-schedule.js';
import { WARM_UP_LIMIT_S, warmUp } from './chaos-warmup.js';
import type { FaultKind, StoreKind } from './chaos-schedule.js';
import { proxyReader, readBack, storeReader } from './chaos-checker.js';
import type { SecondSample } from './chaos-checker.js';
import { startChaosStore } from './chaos-stores.js';
import type { ChaosStore } from './chaos-stores.js';
import { sleep } from './commit-checker.js';
import { LoadConnection, newShared } from './load-connection.js';
import type { Shared } from './load-connection.js';
import { defaultLoadRunOptions } from './load-run-types.js';

export interface ChaosOptions {
  store: StoreKind;
  seconds: number;
  seed: number;
  connections: number;
  /** Partition commits per second, all connections together. */
  rate: number;
  meanGapS: number;
  minFaultS: number;
  maxFaultS: number;
  /** Records per second the producer writes for the consumer groups (0: no consumers). */
  records: number;
  /** Fault kinds left out. */
  exclude: FaultKind[];
  /** The run's last seconds without a fault starting or running (default: a quarter, at least 20). */
  quietEndS?: number;
  /**
   * Query parameters added to the store URL the proxies are given (not the checker's own reads),
   * e.g. `wait=1`: Redis commits acknowledged only after a replica has them (docs/stores.md).
   */
  storeQuery?: string;
  /**
   * After the verdict's read-back, one load group's offsets are deleted from the store and read
   * back again: the checker must report them (negativeControlLost in the result).
   */
  negativeControl?: boolean;
  /**
   * An existing broker to use instead of starting one (npm test's bed broker): it must not be
   * killed, so broker-kill is left out.
   */
  bootstrap?: string;
  log: (line: string) => void;
}

export const defaultChaosOptions: ChaosOptions = {
  store: 'redis',
  seconds: 300,
  seed: 1,
  connections: 300,
  rate: 3000,
  meanGapS: 20,
  minFaultS: 3,
  maxFaultS: 12,
  records: 100,
  exclude: [],
  log: () => undefined,
};

const P = 5;
const CONSUMER_PARTITIONS = 6;
const QUIET_START_S = 15;

export async function chaosRun(partial: Partial<ChaosOptions>): Promise<ChaosResult> {
  const o: ChaosOptions = { ...defaultChaosOptions, ...partial };
  const runId = `chaos-${Date.now().toString(36)}-${randomBytes(2).toString('hex')}`;
  const loadTopic = runId;
  const consumerTopic = `${runId}-records`;
  const t0 = performance.now();
  // Seconds since the start of the measured run (negative before it): faults and readiness alike.
  let start = 1e9;
  const clock = () => (performance.now() - t0) / 1000 - start;
  let kafka: KafkaCluster | undefined;
  let store: ChaosStore | undefined;
  const proxies: ChaosProxy[] = [];
  const shareds: Shared[] = [];
  const conns: LoadConnection[] = [];
  const groups: ChaosGroup[] = [];
  let producer: ReturnType<typeof runProducer> | undefined;
  let fresh: ChaosProxy | undefined;
  let storeEvents: SentinelEvents | undefined;
  try {
    await ensureBuilt();
    const cluster: Pick<KafkaCluster, 'bootstrap' | 'classpath' | 'brokers' | 'startBroker'> =
      o.bootstrap !== undefined
        ? {
            bootstrap: o.bootstrap,
            classpath: await kafkaClasspath(),
            brokers: [],
            startBroker: () => Promise.reject(new Error('not our broker')),
          }
        : (kafka = await startKafka());
    store = await startChaosStore(o.store);
    const exclude = [...o.exclude, ...(o.bootstrap !== undefined ? (['broker-kill'] as const) : [])];
    for (const { kind, why } of store.unavailable) {
      exclude.push(kind);
      o.log(`left out: ${kind} (${why})`);
    }
    const proxyCount = o.store === 'embedded' ? 1 : 2;
    const schedule = faultSchedule({
      seed: o.seed,
      store: o.store,
      seconds: o.seconds,
      meanGapS: o.meanGapS,
      minDurationS: o.minFaultS,
      maxDurationS: o.maxFaultS,
      proxies: proxyCount,
      quietStartS: QUIET_START_S,
      quietEndS: o.quietEndS ?? Math.max(20, o.seconds / 4),
      exclude,
    });
    o.log(
      `seed ${o.seed}: ${schedule.length} faults (seconds after the warm-up): ${schedule.map((f) => `${f.atS}s ${f.kind}/${f.durationS}s`).join(', ')}`,
    );
    await createTopics({ bootstrap: cluster.bootstrap }, [
      { topic: loadTopic, partitions: P },
      { topic: consumerTopic, partitions: CONSUMER_PARTITIONS },
    ]);
    const proxyArgs = ['--bootstrap-server', cluster.bootstrap, ...withQuery(store.proxyArgs, o.storeQuery)];
    if (o.storeQuery !== undefined) o.log(`store URL query for the proxies: ${o.storeQuery}`);
    for (let i = 0; i < proxyCount; i++)
      proxies.push(await ChaosProxy.start(`proxy-${'AB'[i]}`, proxyArgs, clock));
    for (const p of proxies) p.startPolling();
    storeEvents = await store.watchEvents?.(clock, o.log);

    // ---- the load ----
    const loadOpts = { ...defaultLoadRunOptions, partitionsPerCommit: P, requestTimeoutMs: 10_000 };
    for (const p of proxies) {
      const s = newShared(loadOpts, loadTopic);
      [s.host, s.port] = splitHostPort(p.bootstrap);
      shareds.push(s);
    }
    for (let c = 0; c < o.connections; c++)
      conns.push(
        new LoadConnection(
          shareds[c % proxyCount]!,
          c,
          [0, 1].map((g) => `${runId}-c${c}-g${g}`),
        ),
      );
    for (let c = 0; c < conns.length; c += 50)
      await Promise.all(conns.slice(c, c + 50).map((conn) => conn.connect()));

    // ---- the consumers ----
    const produced = new ProducedRecords();
    if (o.records > 0) {
      const kinds: [ConsumerKind, number | null][] = [
        ['java-classic', 0],
        ['java-consumer', proxyCount - 1],
        ['librdkafka', 0],
        ['direct-classic', null],
      ];
      for (const [kind, proxy] of kinds) {
        const bootstrap = proxy === null ? cluster.bootstrap : proxies[proxy]!.bootstrap;
        const id = `${runId}-${kind}`;
        groups.push(new ChaosGroup(kind, consumerTopic, id, bootstrap, cluster.classpath, proxy, clock));
      }
      for (const g of groups) g.start();
      producer = runProducer(
        cluster.classpath,
        cluster.bootstrap,
        consumerTopic,
        o.records,
        o.seconds,
        produced,
      );
    }

    // ---- the measured run: the load loop, the faults, a sample a second ----
    start = (performance.now() - t0) / 1000;
    const runClock = clock;
    const faultTasks: Promise<FaultRecord>[] = [];
    const series: SecondSample[] = [];
    const reqRate = o.rate / P;
    // The warm-up's "first commit acknowledged", per proxy (chaos-warmup.ts).
    const firstAckS: (number | null)[] = shareds.map(() => null);
    // The schedule's clock starts when the run is warmed up (chaos-warmup.ts): a fault during the
    // start-up (a broker killed before the consumers had joined) would measure the warm-up, not
    // the fault. The run then lasts o.seconds after it; one that never warms up within
    // WARM_UP_LIMIT_S starts its faults anyway, and fails on the warm-up.
    let faultsFromS: number | null = null;
    await new Promise<void>((resolve) => {
      let scheduled = 0;
      let next = 0;
      let lastExpiry = 0;
      let lastSample = -1;
      const timer = setInterval(() => {
        const now = performance.now();
        const t = runClock();
        if (faultsFromS === null) {
          const warm = warmUp(
            {
              proxyReadyS: proxies.map((p) => p.firstReadyS),
              firstAckS,
              assignedS: groups.map((g) => g.report.firstAssignedAtS),
            },
            proxies.map((p) => p.name),
            groups.map((g) => g.kind),
          );
          if (warm.endS !== null || t > WARM_UP_LIMIT_S) {
            faultsFromS = t;
            o.log(
              `${t.toFixed(1)} s: warmed up${warm.endS === null ? ' (not: the limit passed)' : ''}; faults from now`,
            );
          }
        }
        const endS = faultsFromS === null ? Infinity : faultsFromS + o.seconds;
        const faultClock = faultsFromS === null ? -Infinity : t - faultsFromS;
        const due = Math.floor(Math.min(t, endS) * reqRate);
        for (; scheduled < due; scheduled++) conns[scheduled % conns.length]!.commit(now);
        if (now - lastExpiry > 200) {
          lastExpiry = now;
          for (const c of conns) c.expire(now);
        }
        while (next < schedule.length && schedule[next]!.atS <= faultClock) {
          const f = schedule[next++]!;
          o.log(`${t.toFixed(1)} s: fault ${f.id} ${f.kind} (target ${f.target}) for ${f.durationS} s`);
          faultTasks.push(
            runFault(f, { proxies, kafka: cluster, store: store!, clock: runClock }).then((r) => {
              o.log(`${runClock().toFixed(1)} s: fault ${r.id} ${r.kind} over: ${r.note}`);
              return r;
            }),
          );
        }
        shareds.forEach((s, k) => {
          if (firstAckS[k] === null && s.totals.partitionCommitsAcked > 0) firstAckS[k] = t;
        });
        if (Math.floor(t) > lastSample) {
          lastSample = Math.floor(t);
          series.push({
            atS: t,
            acked: shareds.reduce((n, s) => n + s.totals.partitionCommitsAcked, 0),
            failed: shareds.reduce((n, s) => n + s.totals.failed, 0),
          });
          if (lastSample % 10 === 0) o.log(progress(t, series, proxies));
        }
        if (t >= endS) {
          clearInterval(timer);
          resolve();
        }
      }, 5);
    });
    const injected = await Promise.all(faultTasks);
    const faults = [
      ...injected,
      ...(storeEvents ? sentinelFaults(storeEvents.events, injected.length + 1) : []),
    ].sort((a, b) => a.startedS - b.startedS);
    // Answers on the way belong to the run.
    const drainEnd = performance.now() + 12_000;
    while (conns.some((c) => c.inFlight > 0) && performance.now() < drainEnd) {
      for (const c of conns) c.expire(performance.now());
      await sleep(50);
    }
    for (const s of shareds) s.running = false;
    for (const c of conns) c.close();
    const measuredS = runClock();

    // ---- the consumers catch up on every record the producer had acknowledged ----
    const producerEnd = producer
      ? await Promise.race([producer.done, sleep(180_000).then(() => null)])
      : null;
    producer?.kill();
    const catchUpEnd = Date.now() + 180_000;
    while (groups.some((g) => g.countMissing(produced) > 0) && Date.now() < catchUpEnd) await sleep(1000);
    for (const g of groups) g.report.missing = g.countMissing(produced);
    // Committed offsets settle (a commit after the last batch) before they are read back.
    await sleep(3000);
    for (const g of groups) await g.stop();
    for (const p of proxies) p.stopPolling();
    const rss = proxies.map((p) => p.rssSummary());
    const warnings = proxies.map((p) => p.warnings());
    const exitCodes: (number | null)[] = [];
    for (const p of proxies) exitCodes.push(await p.stop());

    // ---- read back: a fresh proxy, then the store itself ----
    fresh = await ChaosProxy.start('proxy-fresh', proxyArgs, clock);
    const viaProxy = await proxyReader(fresh.bootstrap);
    const proxyRead = await readBack(
      viaProxy.read,
      conns,
      loadTopic,
      P,
      groups,
      consumerTopic,
      CONSUMER_PARTITIONS,
    );
    viaProxy.close();
    await fresh.stop();
    fresh = undefined;
    const direct = await store.openDirect();
    let storeRead;
    let negativeControl: number | null = null;
    try {
      storeRead = await readBack(
        storeReader(direct),
        conns,
        loadTopic,
        P,
        groups,
        consumerTopic,
        CONSUMER_PARTITIONS,
      );
      if (o.negativeControl) {
        // The checker must see a loss: one group's offsets deleted behind its back, read back alone.
        await direct.deleteGroup(conns[0]!.groups[0]!);
        negativeControl = (
          await readBack(storeReader(direct), conns.slice(0, 1), loadTopic, P, [], consumerTopic, 0)
        ).lost.length;
        o.log(`negative control: ${negativeControl} partitions reported lost after deleting one group`);
      }
    } finally {
      await direct.close();
    }
    return faultTableAndVerdict({
      options: { ...o, log: undefined },
      measuredS,
      faults,
      series,
      proxies,
      shareds,
      groups: groups.map((g) => g.report),
      produced: produced.count,
      producerErrors: producerEnd?.errors ?? null,
      proxyRead,
      storeRead,
      rss,
      warnings,
      exitCodes,
      negativeControl,
      leftOut: store.unavailable,
      warmUp: {
        proxyReadyS: proxies.map((p) => p.firstReadyS),
        firstAckS,
        assignedS: groups.map((g) => g.report.firstAssignedAtS),
      },
    });
  } finally {
    for (const s of shareds) s.running = false;
    for (const c of conns) c.close();
    producer?.kill();
    await Promise.allSettled(groups.map((g) => g.stop()));
    await Promise.allSettled([...proxies, ...(fresh ? [fresh] : [])].map((p) => p.kill()));
    storeEvents?.close();
    await Promise.allSettled([kafka?.stop(), store?.stop()]);
  }
}

function progress(t: number, series: SecondSample[], proxies: ChaosProxy[]): string {
  const last = series.at(-1)!;
  const before = series.findLast((s) => s.atS <= t - 10) ?? { acked: 0, failed: 0, atS: 0 };
  const rate = (last.acked - before.acked) / Math.max(1, last.atS - before.atS);
  return (
    `[chaos] ${t.toFixed(0)} s: ${rate.toFixed(0)} partition commits/s acked, ${last.failed} requests failed so far, ` +
    proxies
      .map((p) => `${p.name} ${p.pid === undefined ? 'down' : `${p.lastRssMb().toFixed(0)} MB`}`)
      .join(', ')
  );
}

/** The proxy arguments with `query` added to the value of `--store` (unchanged without one). */
function withQuery(args: string[], query: string | undefined): string[] {
  const i = args.indexOf('--store');
  if (query === undefined || i < 0 || args[i + 1] === undefined) return args;
  const url = args[i + 1]!;
  return args.map((a, k) => (k === i + 1 ? `${url}${url.includes('?') ? '&' : '?'}${query}` : a));
}

// ---- command line --------------------------------------------------------------------------------

function parseArgs(argv: string[]): Partial<ChaosOptions> & { json?: string } {
  const out: Partial<ChaosOptions> & { json?: string } = {};
  const nums: Record<string, keyof ChaosOptions> = {
    seed: 'seed',
    connections: 'connections',
    rate: 'rate',
    'fault-every': 'meanGapS',
    'min-fault': 'minFaultS',
    'max-fault': 'maxFaultS',
    records: 'records',
  };
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i]!.replace(/^--/, '');
    const value = argv[i + 1];
    if (value === undefined) throw new Error(`--${name} needs a value`);
    if (name === 'store') {
      if (!['embedded', 'redis', 'redis-cluster', 'sentinel', 'zk'].includes(value))
        throw new Error(`--store ${value}: embedded|redis|redis-cluster|sentinel|zk`);
      out.store = value as StoreKind;
    } else if (name === 'minutes' && Number(value) > 0) out.seconds = Math.round(Number(value) * 60);
    else if (name === 'exclude') out.exclude = value.split(',') as FaultKind[];
    else if (name === 'json') out.json = value;
    else if (name === 'store-query') out.storeQuery = value;
    else if (nums[name] !== undefined && Number.isFinite(Number(value)))
      (out as Record<string, number>)[nums[name]] = Number(value);
    else throw new Error(`unknown option or bad value: --${name} ${value}`);
  }
  return out;
}

async function main(): Promise<void> {
  const { json, ...opts } = parseArgs(process.argv.slice(2));
  const result = await chaosRun({ ...opts, log: (line) => console.error(line) });
  console.log(result.report);
  if (json !== undefined) writeFileSync(json, JSON.stringify(result, null, 2));
  // Exit now: a store client closed on a store that is gone (a Redis Cluster client after its
  // nodes were killed) can keep reconnect timers alive.
  process.exit(result.ok ? 0 : 1);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(2);
  });
}
