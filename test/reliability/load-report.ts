// The load run's report: one line per interval while it runs, and the table and summary at the end.
import os from 'node:os';
import type { IntervalStats, LoadRunResult } from './load-run-types.js';

const f0 = (n: number): string => (Number.isFinite(n) ? n.toFixed(0) : '-');
const f1 = (n: number): string => (Number.isFinite(n) ? n.toFixed(1) : '-');

export function formatInterval(r: IntervalStats, loopP99Ms: number): string {
  return (
    `[load] ${f0(r.endS).padStart(4)} s: ${f0(r.partitionCommitsPerS)} partition commits/s, sent ${r.sent}, ` +
    `answered ${r.answered}, failed ${r.failed}, in flight ${r.inFlight}, p50/p99/max ${f1(r.p50Ms)}/` +
    `${f1(r.p99Ms)}/${f1(r.maxMs)} ms, proxy RSS ${f0(r.rssMb)} MB (anon ${f0(r.rssAnonMb)}, file ` +
    `${f0(r.rssFileMb)}), proxy CPU ${f0(r.proxyCpuPct)}% (waited for a core ${f0(r.proxyCpuWaitPct)}%), generator CPU ${f0(r.loadgenCpuPct)}%, send lag ` +
    `max ${f1(r.sendLagMaxMs)} ms, loop p99 ${f1(loopP99Ms)} ms, load ${r.load1.toFixed(2)}`
  );
}

export function formatReport(r: LoadRunResult): string {
  const o = r.options;
  const lines = [
    `${o.connections} connections, ${o.rate} partition commits/s (${o.rate / o.partitionsPerCommit} OffsetCommit/s of ` +
      `${o.partitionsPerCommit} partitions), ${o.rampSeconds} s ramp + ${o.seconds} s, ${o.store} store, ${o.groupsPerConnection} groups per ` +
      `connection, ${os.cpus().length} cores`,
    '',
    '| until s | partition commits/s | sent | answered | failed | p50 ms | p99 ms | max ms | in flight | RSS MB (anon / file) | proxy CPU % (waiting for a core %) | generator CPU % | load avg |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|',
    ...r.intervals.map(
      (i) =>
        `| ${f0(i.endS)} | ${f0(i.partitionCommitsPerS)} | ${i.sent} | ${i.answered} | ${i.failed} | ${f1(i.p50Ms)} | ` +
        `${f1(i.p99Ms)} | ${f1(i.maxMs)} | ${i.inFlight} | ${f0(i.rssMb)} (${f0(i.rssAnonMb)} / ${f0(i.rssFileMb)}) | ` +
        `${f0(i.proxyCpuPct)} (${f0(i.proxyCpuWaitPct)}) | ${f0(i.loadgenCpuPct)} | ${i.load1.toFixed(2)} |`,
    ),
    '',
    `requests: ${r.totals.sent} sent, ${r.totals.answered} answered, ${r.totals.failed} failed ` +
      `${JSON.stringify(r.totals.failures)}; error codes ${JSON.stringify(r.totals.errorCodes)}`,
    `commits acknowledged: ${r.totals.commitsAcked} (${r.totals.partitionCommitsAcked} partition commits, ` +
      `${f0(r.achievedRate)}/s achieved of ${o.rate}/s); OffsetFetch ${r.totals.fetches} ` +
      `(${r.totals.staleFetches} stale: older than an acknowledged commit sent before them on the connection); ` +
      `Metadata ${r.totals.metadata}`,
    `latency over the run: p50 ${f1(r.latency.p50Ms)} ms, p99 ${f1(r.latency.p99Ms)} ms, p99.9 ` +
      `${f1(r.latency.p999Ms)} ms, max ${f1(r.latency.maxMs)} ms`,
    `proxy RSS: start ${f0(r.rss.startMb)} MB, middle ${f0(r.rss.middleMb)} MB, end ${f0(r.rss.endMb)} MB; median ` +
      `Q2 ${f0(r.rss.q2MedianMb)} MB, Q4 ${f0(r.rss.q4MedianMb)} MB, growth ${f1(r.rss.growthMb)} MB (bound ` +
      `${f0(r.rss.boundMb)} MB), slope over the second half ${r.rss.slopeMbPerMin.toFixed(2)} MB/min: ` +
      (r.rss.ok ? 'flat' : 'NOT FLAT'),
    ...(['rssAnon', 'rssFile'] as const).map(
      (k) =>
        `  ${k === 'rssAnon' ? 'anonymous' : 'file-backed'} part: start ${f0(r[k].startMb)}, middle ${f0(r[k].middleMb)}, ` +
        `end ${f0(r[k].endMb)} MB; median Q2 ${f0(r[k].q2MedianMb)}, Q4 ${f0(r[k].q4MedianMb)} MB, growth ` +
        `${f1(r[k].growthMb)} MB, slope ${r[k].slopeMbPerMin.toFixed(2)} MB/min` +
        (k === 'rssFile' && r.storeDiskMb !== null
          ? ` (embedded store on disk at the end: ${f0(r.storeDiskMb)} MB)`
          : ''),
    ),
    `proxy V8 heap after each full GC (s: MB): ${r.heapAfterGc.map(([t, mb]) => `${t}: ${f0(mb)}`).join(', ') || 'none'}`,
    `store check: ${r.groupsChecked} groups, ${r.partitionsChecked} partitions, ${r.lost.length} wrong` +
      (r.lost.length > 0 ? `, e.g. ${JSON.stringify(r.lost.slice(0, 3))}` : ''),
    `generator: ${r.totals.frameCopies} frame copies, ${r.totals.slowAnswers} answers decoded, ` +
      `${r.totals.connectionsReopened} connections reopened`,
    `proxy: exit code ${r.proxyExitCode}, ${r.proxyWarnings.length} warn/error log lines ` +
      `${JSON.stringify(r.proxyWarningCounts)}, refused partitions by reason ${JSON.stringify(r.proxyRefusals)}`,
    `load average (1/5/15 min): start ${r.loadAverage.start.map((l) => l.toFixed(2)).join(' ')}, end ` +
      `${r.loadAverage.end.map((l) => l.toFixed(2)).join(' ')}`,
    r.ok ? 'RESULT: ok' : `RESULT: FAILED: ${r.reasons.join('; ')}`,
  ];
  return lines.join('\n');
}
