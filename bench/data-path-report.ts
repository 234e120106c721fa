// The tables and the JSON object the data-path benchmark (bench/proxy.ts) ends with: per side,
// throughput against direct, relay CPU per MB, memory and latencies; and the produce sweep's table.
import os from 'node:os';
import { cpuByThreadMs, statusKb } from './process-stats.js';
import { median, pct } from './data-path-sides.js';
import type { Cpu, Side } from './data-path-sides.js';

/** What one benchmark run was asked to do: the report's units and its header. */
export interface DataPathRun {
  records: number;
  recordSize: number;
  rounds: number;
  consumeRounds: number;
  rate: number;
  warmupRecords: number;
  connections: number;
  sweepMb: number;
  sweep: { batches: number[]; records: number[] };
  /** The proxy sides (`proxy` and the --baseline checkouts), compared with HAProxy in the sweep. */
  isProxy: (name: string) => boolean;
}

/** "min-max" of the 1-minute load averages sampled over the run (or the current one). */
function loadRange(load: number[]): string {
  return load.length
    ? `${Math.min(...load).toFixed(1)}-${Math.max(...load).toFixed(1)}`
    : os.loadavg()[0]!.toFixed(1);
}

/**
 * The sweep's table: per batch.size and record size, each side's median CPU ms per produced MB
 * (relays) and MB/s, and each proxy's CPU per MB over HAProxy's (the issue's bound is 1.2).
 */
export function sweepReport(run: DataPathRun, sides: Side[], t0: number, load: number[]): void {
  const haproxy = sides.find((s) => s.name === 'haproxy');
  const proxies = sides.filter((s) => run.isProxy(s.name));
  const loadAverages = loadRange(load);
  const cpuPerMb = (side: Side, key: string, size: number): number | null => {
    const e = side.sweep.get(key);
    if (side.pid === undefined || !e) return null;
    const mb = (Math.round((run.sweepMb * 1e6) / size) * size) / 1e6;
    return median(e.cpuMs) / mb;
  };
  const lines = [
    `produce sweep: ${run.sweepMb} MB per run, ${run.rounds} rounds, medians; ` +
      `${Math.round((Date.now() - t0) / 1000)} s; load average (1 min) ${loadAverages}`,
    '',
    `| batch.size | record B | ${sides.map((s) => (s.pid === undefined ? `${s.name} MB/s` : `${s.name} CPU ms/MB, MB/s`)).join(' | ')} | ${proxies.map((p) => `${p.name} / haproxy CPU`).join(' | ')} |`,
    `|---:|---:|${sides.map(() => '---:').join('|')}|${proxies.map(() => '---:').join('|')}|`,
  ];
  for (const batch of run.sweep.batches) {
    for (const size of run.sweep.records) {
      const key = `${batch}/${size}`;
      const cells = sides.map((s) => {
        const mbs = ((median(s.sweep.get(key)?.recordsPerSec ?? [0]) * size) / 1e6).toFixed(1);
        const cpu = cpuPerMb(s, key, size);
        return cpu === null ? mbs : `${cpu.toFixed(2)}, ${mbs}`;
      });
      const h = haproxy ? cpuPerMb(haproxy, key, size) : null;
      const ratios = proxies.map((p) => {
        const c = cpuPerMb(p, key, size);
        return c !== null && h ? (c / h).toFixed(2) : '';
      });
      lines.push(`| ${batch} | ${size} | ${cells.join(' | ')} | ${ratios.join(' | ')} |`);
    }
  }
  console.log(lines.join('\n'));
}

/** Every side's figures: one JSON object (all of them, per round), then a markdown table. */
export function report(run: DataPathRun, sides: Side[], t0: number, load: number[]): void {
  const direct = sides.find((s) => s.name === 'direct');
  const mbPerRun = (run.records * run.recordSize) / 1e6;
  /** Median over rounds of the side's records/s divided by direct's in the same round. */
  const ratio = (side: Side, runs: (s: Side) => { recordsPerSec: number }[]): number | null =>
    direct ? median(runs(side).map((r, i) => r.recordsPerSec / runs(direct)[i]!.recordsPerSec)) : null;
  const perMb = (cpu: Cpu, runs: number): number | null => (cpu.user + cpu.sys) / (runs * mbPerRun);
  const rows = sides.map((s) => {
    const relay = s.pid !== undefined;
    return {
      side: s.name,
      produceRecPerSec: s.produce.map((r) => Math.round(r.recordsPerSec)),
      produceRatio: ratio(s, (x) => x.produce),
      consumeRecPerSec: s.consume.map((r) => Math.round(r.recordsPerSec)),
      consumeRatio: ratio(s, (x) => x.consume),
      cpuMsPerMbProduce: relay ? perMb(s.cpu.produce, s.produce.length) : null,
      cpuMsPerMbConsume: relay ? perMb(s.cpu.consume, s.consume.length) : null,
      cpuUserSysMs: relay ? s.cpu : null,
      cpuMsPerRun: relay ? s.cpuPerRunMs : null,
      /** CPU per MB over the warm-up (produce and consume together): the cost before compilation settles. */
      warmupCpuMsPerMb:
        relay && run.warmupRecords > 0
          ? (s.warmupCpu.user + s.warmupCpu.sys) / ((2 * run.warmupRecords * run.recordSize) / 1e6)
          : null,
      /** Over the relay's whole life (warm-up included), by thread name: JIT and GC threads show here. */
      cpuMsByThread: relay ? Object.fromEntries(cpuByThreadMs(s.pid)) : null,
      peakRssMb: relay ? statusKb(s.pid!, 'VmHWM') / 1024 : null,
      rssMbPer1000Connections:
        s.connectionsRssMb !== undefined ? (s.connectionsRssMb * 1000) / run.connections : null,
      fixedRateP50P99Ms: s.rate.map((r) => [r.p50Ms, r.p99Ms]),
      fixedRateMedianP50P99Ms: s.rate.length
        ? [median(s.rate.map((r) => r.p50Ms)), median(s.rate.map((r) => r.p99Ms))]
        : null,
      roundTripP50P99Us: s.rttUs.length
        ? [Math.round(pct(s.rttUs, 0.5)), Math.round(pct(s.rttUs, 0.99))]
        : null,
    };
  });
  const loadAverages = loadRange(load);
  console.log(
    JSON.stringify(
      {
        records: run.records,
        recordSize: run.recordSize,
        rounds: run.rounds,
        consumeRounds: run.consumeRounds,
        rate: run.rate,
        rows,
        wallSeconds: Math.round((Date.now() - t0) / 1000),
        loadAverage1mRange: loadAverages,
      },
      null,
      2,
    ),
  );
  const f = (x: number | null | undefined, digits = 2): string => (x == null ? '' : x.toFixed(digits));
  const lines = [
    `${run.records} x ${run.recordSize} B, ${run.rounds} produce and ${run.consumeRounds} consume rounds, fixed rate ${run.rate}/s; load average (1 min) ${loadAverages}`,
    '',
    '| side | produce rec/s (median) | ratio to direct | consume rec/s (median) | ratio to direct | CPU ms/MB produce | CPU ms/MB consume | peak RSS MB | RSS MB per 1,000 connections | p50 / p99 ms at fixed rate | Produce round trip p50 / p99 µs |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map(
      (r) =>
        `| ${r.side} | ${Math.round(median(r.produceRecPerSec))} | ${f(r.produceRatio)} | ${Math.round(median(r.consumeRecPerSec))} | ${f(r.consumeRatio)} | ${f(r.cpuMsPerMbProduce)} | ${f(r.cpuMsPerMbConsume)} | ${f(r.peakRssMb, 0)} | ${f(r.rssMbPer1000Connections, 1)} | ${r.fixedRateMedianP50P99Ms?.join(' / ') ?? ''} | ${r.roundTripP50P99Us?.join(' / ') ?? ''} |`,
    ),
  ];
  console.log(lines.join('\n'));
}

/**
 * The consumers' table: per consumer (Java ConsumerPerformance, librdkafka, kafkajs) and side, the
 * median relay CPU ms per consumed MB and records/s, and each relay's median CPU over HAProxy's for
 * that consumer (issue 42's bound: at or below 1).
 */
export function consumersReport(run: DataPathRun, sides: Side[], consumers: string[], load: number[]): void {
  const mbPerRun = (run.records * run.recordSize) / 1e6;
  const haproxy = sides.find((s) => s.name === 'haproxy');
  const relays = sides.filter((s) => s.pid !== undefined && s !== haproxy);
  const cpuPerMb = (side: Side, consumer: string): number | null => {
    const e = side.consumers.get(consumer);
    return side.pid === undefined || !e?.cpuMs.length ? null : median(e.cpuMs) / mbPerRun;
  };
  const rows = consumers.map((consumer) => {
    const h = haproxy ? cpuPerMb(haproxy, consumer) : null;
    const cells = sides.map((s) => {
      const recs = Math.round(median(s.consumers.get(consumer)?.recordsPerSec ?? [0]));
      const cpu = cpuPerMb(s, consumer);
      return cpu === null ? `${recs}` : `${cpu.toFixed(2)}, ${recs}`;
    });
    const ratios = relays.map((r) => {
      const c = cpuPerMb(r, consumer);
      return c !== null && h ? (c / h).toFixed(2) : '';
    });
    return { consumer, cells, ratios };
  });
  console.log(
    JSON.stringify({
      consumers: Object.fromEntries(
        consumers.map((c) => [
          c,
          Object.fromEntries(
            sides.map((s) => [s.name, { cpuMsPerMb: cpuPerMb(s, c), runs: s.consumers.get(c) ?? null }]),
          ),
        ]),
      ),
    }),
  );
  console.log(
    [
      `consume by consumer: ${run.records} x ${run.recordSize} B per run, ${run.consumeRounds} rounds, medians; ` +
        `load average (1 min) ${loadRange(load)}`,
      '',
      `| consumer | ${sides.map((s) => (s.pid === undefined ? `${s.name} rec/s` : `${s.name} CPU ms/MB, rec/s`)).join(' | ')} | ${relays.map((r) => `${r.name} / haproxy CPU`).join(' | ')} |`,
      `|---|${sides.map(() => '---:').join('|')}|${relays.map(() => '---:').join('|')}|`,
      ...rows.map((r) => `| ${r.consumer} | ${r.cells.join(' | ')} | ${r.ratios.join(' | ')} |`),
    ].join('\n'),
  );
}
