/**
 * The load run of issue #7: many raw client connections commit offsets through one proxy (the CLI,
 * its own process) at a fixed aggregate rate for a fixed time; afterwards every acknowledged commit
 * is looked up in the store itself.
 *
 *   npx tsx test/reliability/load-run.ts [--connections 2000] [--rate 10000] [--seconds 600] [--ramp 10]
 *     [--store embedded|redis|memory] [--partitions-per-commit 5] [--groups-per-connection 2]
 *     [--interval 10] [--fetch-every 20] [--metadata-every 30] [--timeout-ms 10000]
 *     [--rss-growth-mb 50] [--rss-growth-fraction 0.25] [--min-rate-fraction 0.98]
 *     [--proxy-args "--authorize off"] [--proxy-metrics 1] [--cpu-prof <dir>]
 *
 * KOP_BOOTSTRAP=host:port uses that cluster instead of starting the bed's broker; Redis (AOF,
 * appendfsync always) is started for --store redis. Exit code 1 when a request failed, an
 * acknowledged commit is missing from the store, an OffsetFetch answer was older than a commit
 * acknowledged before it on the same connection, the proxy's RSS was not flat, or the achieved rate
 * fell short; the summary says which. Prints a table per interval, a summary and one JSON line.
 *
 * Open loop: after a ramp (the rate rising linearly from 0 over `ramp` seconds, so the connections
 * start one after another), request i is due at t0 + i / (rate / partitions) seconds and goes to
 * connection i mod N, so every connection sends one OffsetCommit (v8, admin-style generation -1) of
 * `partitions` partitions every N * partitions / rate seconds, to one of its own groups in turn.
 * A slow answer never delays the next request (it is pipelined on the same connection), so latency
 * and in-flight counts show a proxy that falls behind instead of hiding it. Each connection also
 * sends an OffsetFetch after every `fetchEvery`-th commit (its answer is checked against what was
 * acknowledged) and a Metadata request every `metadataEvery` seconds (relayed to the broker and
 * rewritten by the proxy, as real clients refresh metadata: the relay path under the same load).
 *
 * The generator stays cheap: each (connection, group) has one encoded OffsetCommit frame whose
 * offsets and correlation id are patched in place before each send (a copy is written only when the
 * socket still holds unsent bytes, so a queued buffer is never changed), and an answer that is
 * byte-for-byte the "all partitions NONE" answer is accepted without decoding.
 *
 * Offsets: commit k (k = 1, 2, ...) of a group writes k * partitions + p to partition p, so a stored
 * or fetched value names the commit it came from and the partition it was meant for.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { EmbeddedStore } from '../../backends/embedded-store.js';
import { openStore } from '../../backends/open-store.js';
import type { OffsetStore } from '../../backends/store.js';
import { createTopics } from '../bed/clients/kafkajs.js';
import { startKafka } from '../bed/kafka.js';
import type { KafkaCluster } from '../bed/kafka.js';
import { startRedis } from '../bed/redis.js';
import type { RedisServer } from '../bed/redis.js';
import { ensureBuilt, freePortRange, spawnProxy } from '../harness/proxy.js';
import type { ProxyProcess } from '../harness/proxy.js';
import { RawClient, splitHostPort } from '../harness/raw-client.js';
import { fetchOnce, memoryOf, sleep } from './commit-checker.js';
import { MARK_COMPACT } from './gc-trace.js';
import { LoadConnection, MB, newShared } from './load-connection.js';
import { diskUsage, processCpuMs, rssVerdict, runQueueMs } from './load-proxy-process.js';
import { formatInterval, formatReport } from './load-report.js';
import type {
  IntervalStats,
  LoadRunOptions,
  LoadRunResult,
  LoadStore,
  LostCommit,
  MemorySample,
} from './load-run-types.js';
import { defaultLoadRunOptions } from './load-run-types.js';

// ---- the run -------------------------------------------------------------------------------------

export function percentile(sorted: ArrayLike<number>, f: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(f * sorted.length))]!;
}

function sortedCopy(values: number[]): Float64Array {
  return Float64Array.from(values).sort();
}

async function readerFor(
  store: LoadStore,
  ctx: { dataDir: string; redis?: RedisServer; proxy: ProxyProcess; topic: string; partitions: number },
): Promise<{
  store: OffsetStore | null;
  read: (group: string) => Promise<Map<number, number>>;
  done: () => Promise<void>;
}> {
  if (store === 'memory') {
    // The memory store lives inside the proxy: read it through the proxy (before it stops).
    const client = await RawClient.connect(ctx.proxy.bootstrap);
    return {
      store: null,
      read: async (group) => {
        const { errorCode, offsets } = await fetchOnce(client, group, ctx.topic, ctx.partitions);
        if (errorCode !== 0) throw new Error(`OffsetFetch of ${group}: error ${errorCode}`);
        return new Map([...offsets].filter(([, o]) => o >= 0n).map(([p, o]) => [p, Number(o)]));
      },
      done: async () => client.close(),
    };
  }
  const opened: OffsetStore =
    store === 'embedded' ? new EmbeddedStore({ dataDir: ctx.dataDir }) : await openStore(ctx.redis!.url);
  return {
    store: opened,
    read: async (group) => {
      const offsets = await opened.fetch(group, null);
      return new Map(
        offsets.filter((o) => o.topic === ctx.topic).map((o) => [o.partition, Number(o.offset)]),
      );
    },
    done: () => opened.close(),
  };
}

export async function runLoad(partial: Partial<LoadRunOptions> = {}): Promise<LoadRunResult> {
  const opts: LoadRunOptions = { ...defaultLoadRunOptions, ...partial };
  const log = opts.log ?? (() => undefined);
  const N = opts.connections;
  const P = opts.partitionsPerCommit;
  const reqRate = opts.rate / P;
  const runId = `load-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
  const topic = runId;
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'kop-load-'));
  const loadStart = os.loadavg();

  let kafka: KafkaCluster | undefined;
  let redis: RedisServer | undefined;
  let proxy: ProxyProcess | undefined;
  const conns: LoadConnection[] = [];
  const shared = newShared(opts, topic);
  try {
    const bootstrap = opts.bootstrap ?? (kafka = await startKafka()).bootstrap;
    if (opts.store === 'redis') redis = await startRedis({ appendfsync: 'always' });
    await createTopics({ bootstrap }, [{ topic, partitions: P }]);
    await ensureBuilt();
    const storeArgs =
      opts.store === 'redis'
        ? ['--store', redis!.url]
        : opts.store === 'memory'
          ? ['--store', 'memory://']
          : [];
    const httpPort = opts.proxyMetrics ? await freePortRange(0) : null;
    proxy = await spawnProxy(
      [
        '--bootstrap-server',
        bootstrap,
        '--data-dir',
        dataDir,
        ...(httpPort !== null ? ['--http', `127.0.0.1:${httpPort}`] : []),
        ...storeArgs,
        ...opts.proxyArgs,
      ],
      {},
      // --trace-gc: the heap left after each full (mark-compact) GC is what the proxy really holds.
      [
        '--trace-gc',
        ...(opts.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(opts.cpuProfDir)}`] : []),
      ],
    );
    const pid = proxy.child.pid!;
    [shared.host, shared.port] = splitHostPort(proxy.bootstrap);
    log(
      `proxy pid ${pid} on ${proxy.bootstrap} (${opts.store} store), broker ${bootstrap}; opening ${N} connections`,
    );

    for (let c = 0; c < N; c++) {
      conns.push(
        new LoadConnection(
          shared,
          c,
          Array.from({ length: opts.groupsPerConnection }, (_, g) => `${runId}-c${c}-g${g}`),
        ),
      );
    }
    // In batches: every accepted client makes the proxy open a broker connection too.
    for (let c = 0; c < N; c += 50) await Promise.all(conns.slice(c, c + 50).map((conn) => conn.connect()));
    log(
      `${N} connections open; proxy RSS ${(memoryOf(pid).rss / MB).toFixed(0)} MB; ramp ${opts.rampSeconds} s, then ${opts.seconds} s at the full rate`,
    );

    // ---- the open loop ----
    const intervals: IntervalStats[] = [];
    const samples: MemorySample[] = [];
    const loop = monitorEventLoopDelay({ resolution: 10 });
    loop.enable();
    // Request i is due at t0 + (i - rampCount) / reqRate, or within the ramp before t0 (rate rising linearly).
    const ramp = opts.rampSeconds;
    const t0 = performance.now() + ramp * 1000;
    const rampCount = Math.floor((reqRate * ramp) / 2);
    const dueAt = (i: number): number =>
      i < rampCount
        ? t0 - ramp * 1000 + Math.sqrt((2 * ramp * i) / reqRate) * 1000
        : t0 + ((i - rampCount) / reqRate) * 1000;
    let measuring = false;
    let measuredPartitions = 0;
    let scheduled = 0;
    let metadataScheduled = 0;
    let nextSample = 0;
    let nextInterval = opts.intervalSeconds;
    let intervalStart = 0;
    let sendLagMax = 0;
    let cpuMark = { proxy: processCpuMs(pid), wait: runQueueMs(pid), loadgen: process.cpuUsage() };
    let faultDone = opts.fault === undefined;
    const heapAfterGc: [number, number][] = [];
    let gcScanned = proxy.output().length;

    const closeInterval = (endS: number): void => {
      const mem = memoryOf(pid);
      samples.push({ t: endS, ...mem });
      const lat = sortedCopy(shared.interval.latencies);
      const proxyCpu = processCpuMs(pid);
      const proxyWait = runQueueMs(pid);
      const loadgen = process.cpuUsage(cpuMark.loadgen);
      const wallMs = (endS - intervalStart) * 1000;
      let inFlight = 0;
      for (const c of conns) inFlight += c.inFlight;
      const row: IntervalStats = {
        endS,
        sent: shared.interval.sent,
        answered: shared.interval.answered,
        failed: shared.interval.failed,
        partitionCommitsPerS: shared.interval.partitions / (endS - intervalStart),
        p50Ms: percentile(lat, 0.5),
        p99Ms: percentile(lat, 0.99),
        maxMs: lat.length > 0 ? lat[lat.length - 1]! : NaN,
        inFlight,
        rssMb: mem.rss / MB,
        rssAnonMb: mem.anon / MB,
        rssFileMb: mem.file / MB,
        proxyCpuPct: ((proxyCpu - cpuMark.proxy) / wallMs) * 100,
        proxyCpuWaitPct: ((proxyWait - cpuMark.wait) / wallMs) * 100,
        loadgenCpuPct: ((loadgen.user + loadgen.system) / 1000 / wallMs) * 100,
        sendLagMaxMs: sendLagMax,
        load1: os.loadavg()[0]!,
      };
      intervals.push(row);
      measuredPartitions += shared.interval.partitions;
      log(formatInterval(row, loop.percentile(99) / 1e6));
      loop.reset();
      cpuMark = { proxy: proxyCpu, wait: proxyWait, loadgen: process.cpuUsage() };
      shared.interval = { sent: 0, answered: 0, failed: 0, partitions: 0, latencies: [] };
      sendLagMax = 0;
      intervalStart = endS;
    };

    await new Promise<void>((resolve, reject) => {
      let lastExpiry = 0;
      const tick = (): void => {
        try {
          const now = performance.now();
          const raw = (now - t0) / 1000;
          const elapsed = Math.min(raw, opts.seconds);
          const due =
            raw < 0
              ? Math.floor((reqRate * (raw + ramp) ** 2) / (2 * ramp))
              : rampCount + Math.floor(elapsed * reqRate);
          for (; scheduled < due; scheduled++) {
            sendLagMax = Math.max(sendLagMax, now - dueAt(scheduled));
            conns[scheduled % N]!.commit(now);
          }
          if (now - lastExpiry > 200) {
            lastExpiry = now;
            for (const c of conns) c.expire(now);
          }
          if (raw < 0) return;
          if (!measuring) {
            // The full rate starts: intervals, samples and CPU figures count from here.
            measuring = true;
            shared.interval = { sent: 0, answered: 0, failed: 0, partitions: 0, latencies: [] };
            sendLagMax = 0;
            cpuMark = { proxy: processCpuMs(pid), wait: runQueueMs(pid), loadgen: process.cpuUsage() };
            loop.reset();
          }
          if (opts.metadataEverySeconds > 0) {
            const due = Math.floor((elapsed * N) / opts.metadataEverySeconds);
            for (; metadataScheduled < due; metadataScheduled++)
              conns[(metadataScheduled + (N >> 1)) % N]!.metadata(now);
          }
          if (elapsed >= nextSample) {
            samples.push({ t: elapsed, ...memoryOf(pid) });
            nextSample = Math.floor(elapsed) + 1;
            const out = proxy!.output();
            for (const m of out.slice(gcScanned).matchAll(MARK_COMPACT))
              heapAfterGc.push([elapsed, Number(m[1])]);
            gcScanned = out.lastIndexOf('\n') + 1;
          }
          if (!faultDone && elapsed >= opts.fault!.atSecond) {
            faultDone = true;
            void Promise.resolve(opts.fault!.run(pid)).catch(reject);
          }
          if (elapsed >= nextInterval && elapsed < opts.seconds) {
            closeInterval(nextInterval);
            nextInterval += opts.intervalSeconds;
          }
          if (elapsed >= opts.seconds) {
            clearInterval(timer);
            resolve();
          }
        } catch (err) {
          clearInterval(timer);
          reject(err as Error);
        }
      };
      const timer = setInterval(tick, 2);
    });

    // Answers still on the way belong to the run (and to its last interval).
    const drainEnd = performance.now() + opts.requestTimeoutMs + 1000;
    while (conns.some((c) => c.inFlight > 0) && performance.now() < drainEnd) {
      const now = performance.now();
      for (const c of conns) c.expire(now);
      await sleep(50);
    }
    closeInterval(opts.seconds);
    loop.disable();
    shared.running = false;
    for (const c of conns) c.close();
    const loadEnd = os.loadavg();

    // ---- nothing acknowledged lost: the store itself, read directly ----
    const lost: LostCommit[] = [];
    let proxyExitCode: number | null = null;
    const proxyRefusals = httpPort !== null ? await refusalsOf(httpPort) : {};
    if (opts.store !== 'memory') proxyExitCode = await proxy.stop();
    const reader = await readerFor(opts.store, { dataDir, redis, proxy, topic, partitions: P });
    try {
      if (reader.store !== null) {
        await opts.beforeVerify?.(
          reader.store,
          conns.flatMap((c) => c.groups),
          topic,
        );
      }
      for (const c of conns) await c.verify(reader.read, lost);
    } finally {
      await reader.done();
    }
    if (opts.store === 'memory') proxyExitCode = await proxy.stop();
    const proxyWarnings = proxy
      .output()
      .split('\n')
      .filter((l) => /"level":"(warn|error)"/.test(l));

    const all = sortedCopy(shared.allLatencies);
    const totals = shared.totals;
    const achievedRate = measuredPartitions / opts.seconds;
    const rss = rssVerdict(samples, opts.seconds, opts);
    const rssAnon = rssVerdict(samples, opts.seconds, opts, 'anon');
    const rssFile = rssVerdict(samples, opts.seconds, opts, 'file');
    const reasons: string[] = [];
    if (totals.failed > 0)
      reasons.push(`${totals.failed} requests failed: ${JSON.stringify(totals.failures)}`);
    if (lost.length > 0) reasons.push(`${lost.length} partitions lost acknowledged commits`);
    if (!rss.ok) {
      reasons.push(
        `RSS not flat: last-quarter median ${rss.q4MedianMb.toFixed(0)} MB is ${rss.growthMb.toFixed(0)} MB above the second quarter's (bound ${rss.boundMb.toFixed(0)} MB)`,
      );
    }
    if (achievedRate < opts.minRateFraction * opts.rate) {
      reasons.push(
        `achieved ${achievedRate.toFixed(0)} partition commits/s, below ${opts.minRateFraction} × ${opts.rate}`,
      );
    }
    if (totals.staleFetches > 0) {
      reasons.push(
        `${totals.staleFetches} OffsetFetch answers older than an acknowledged commit sent before them`,
      );
    }
    if (proxyExitCode !== 0) reasons.push(`proxy exited with ${proxyExitCode}`);
    const { log: _log, fault: _fault, beforeVerify: _bv, cpuProfDir: _prof, ...plain } = opts;
    return {
      options: plain,
      intervals,
      totals,
      latency: {
        p50Ms: percentile(all, 0.5),
        p99Ms: percentile(all, 0.99),
        p999Ms: percentile(all, 0.999),
        maxMs: all.length > 0 ? all[all.length - 1]! : NaN,
      },
      achievedRate,
      rss,
      rssAnon,
      rssFile,
      rssSeries: samples.map((m) => [
        Math.round(m.t * 10) / 10,
        Math.round(m.rss / MB),
        Math.round(m.anon / MB),
        Math.round(m.file / MB),
      ]),
      heapAfterGc: heapAfterGc.map(([t, mb]) => [Math.round(t), mb]),
      storeDiskMb: opts.store === 'embedded' ? diskUsage(dataDir) / MB : null,
      lost,
      groupsChecked: conns.length * opts.groupsPerConnection,
      partitionsChecked: conns.length * opts.groupsPerConnection * P,
      proxyWarnings,
      proxyWarningCounts: countWarnings(proxyWarnings),
      proxyRefusals,
      proxyExitCode,
      loadAverage: { start: loadStart, end: loadEnd },
      ok: reasons.length === 0,
      reasons,
    };
  } finally {
    shared.running = false;
    for (const c of conns) c.close();
    await proxy?.stop('SIGKILL');
    await Promise.allSettled([kafka?.stop(), redis?.kill()]);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Non-zero kop_commit_refusals_total counters of the proxy, by reason. */
async function refusalsOf(httpPort: number): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  try {
    const text = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
    for (const m of text.matchAll(/^kop_commit_refusals_total\{reason="([^"]+)"\} (\d+)/gm)) {
      if (Number(m[2]) > 0) out[m[1]!] = Number(m[2]);
    }
  } catch (err) {
    out[`metrics not read: ${(err as Error).message}`] = 0;
  }
  return out;
}

function countWarnings(lines: string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const line of lines) {
    let key = line.slice(0, 120);
    try {
      const e = JSON.parse(line) as { event?: string; reason?: string; error?: { message?: string } };
      key = [e.event, e.reason, e.error?.message].filter((x) => x !== undefined).join(': ');
    } catch {
      // not JSON: counted by its start
    }
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

// ---- command line --------------------------------------------------------------------------------

function parseArgs(argv: string[]): Partial<LoadRunOptions> {
  const names: Record<string, keyof LoadRunOptions> = {
    connections: 'connections',
    rate: 'rate',
    seconds: 'seconds',
    ramp: 'rampSeconds',
    'partitions-per-commit': 'partitionsPerCommit',
    'groups-per-connection': 'groupsPerConnection',
    interval: 'intervalSeconds',
    'fetch-every': 'fetchEvery',
    'metadata-every': 'metadataEverySeconds',
    'timeout-ms': 'requestTimeoutMs',
    'rss-growth-mb': 'rssGrowthMb',
    'rss-growth-fraction': 'rssGrowthFraction',
    'min-rate-fraction': 'minRateFraction',
    'proxy-metrics': 'proxyMetrics',
  };
  const out: Record<string, unknown> = {};
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i]!.replace(/^--/, '');
    const value = argv[i + 1];
    if (value === undefined) throw new Error(`--${name} needs a value`);
    if (name === 'proxy-args') {
      out['proxyArgs'] = value.split(' ').filter((a) => a !== '');
    } else if (name === 'cpu-prof') {
      out['cpuProfDir'] = value;
    } else if (name === 'store') {
      if (!['embedded', 'redis', 'memory'].includes(value))
        throw new Error(`--store ${value}: embedded|redis|memory`);
      out['store'] = value;
    } else if (names[name] !== undefined && Number.isFinite(Number(value))) {
      out[names[name]] = Number(value);
    } else {
      throw new Error(`unknown option or bad value: --${name} ${value}`);
    }
  }
  return out as Partial<LoadRunOptions>;
}

async function main(): Promise<void> {
  const opts = parseArgs(process.argv.slice(2));
  const bootstrap = process.env['KOP_BOOTSTRAP'];
  const result = await runLoad({
    ...opts,
    ...(bootstrap ? { bootstrap } : {}),
    log: (line) => console.error(line),
  });
  console.log(formatReport(result));
  console.log(
    JSON.stringify({
      ...result,
      lost: result.lost.slice(0, 100),
      proxyWarnings: result.proxyWarnings.slice(0, 20),
    }),
  );
  process.exitCode = result.ok ? 0 : 1;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(2);
  });
}
