// What the proxy costs at rest, paired in one run with other builds and the bare Node relay: RSS at
// rest, RSS per idle client connection, and CPU time while idle (timers: the metrics' event-loop-
// delay monitor, the store's ping, the idle sweep). No throughput: peak RSS under load is
// bench/proxy.ts's (its `peak RSS` column).
//
//   npx tsx bench/memory.ts [--baseline <dir>[,<dir>]] [--connections N] [--rounds K]
//     [--rest-seconds S] [--settle-seconds S] [--no-http] [--store URL]
//     [--proxy-node-args=<node options>] [--no-build]
//
// One 1-node Kafka from the test bed; each side a process of its own: `proxy` (this checkout's CLI,
// with --http so that its metrics run, as in production), `baseline`, `baseline2`, ... (other built
// checkouts' CLIs, alike) and `bare` (bench/bare-relay.mjs to the broker). First every side sits
// idle for --rest-seconds: its VmRSS (file-backed and anonymous apart) at 2 s and at the end, its
// VmHWM then (the peak of its start: bench/proxy.ts's `peak RSS` is this figure, reached in the first
// seconds, before any traffic), and its CPU time over that span. Then --rounds rounds: N connections to every side (waves of 100; the
// sides' order reversed every other round), each sending one ApiVersions and reading its answer (so
// a proxy has opened its broker connection too); each side's VmRSS growth is read 1 s after the
// last side's connections were open and again --settle-seconds later, then every connection is
// closed and the sides settle again before the next round. The reading after 1 s depends on
// whether V8 had already grown its heap for other reasons (a heap shrunk by its memory reducer
// grows again, one left large absorbs the connections); the settled one is the steady cost.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { startKafka } from '../test/bed/kafka.js';
import { freePortRange, spawnProxy } from '../test/harness/proxy.js';
import type { ProxyProcess } from '../test/harness/proxy.js';
import type { RawClient } from '../test/harness/raw-client.js';
import { openIdle } from './memory-idle.js';
import { cpuMs } from './process-stats.js';
import { startBareRelay } from './relays.js';
import type { RelayProcess } from './relays.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const { values: args } = parseArgs({
  options: {
    baseline: { type: 'string' },
    connections: { type: 'string', default: '1000' },
    rounds: { type: 'string', default: '2' },
    'rest-seconds': { type: 'string', default: '60' },
    'settle-seconds': { type: 'string', default: '40' },
    'no-http': { type: 'boolean', default: false },
    store: { type: 'string' },
    /** Options for node itself on the `proxy` side only (e.g. V8 heap flags), space-separated. */
    'proxy-node-args': { type: 'string', default: '' },
    'no-build': { type: 'boolean', default: false },
  },
});
const CONNECTIONS = Number(args.connections);
const ROUNDS = Number(args.rounds);
const REST_MS = Number(args['rest-seconds']) * 1000;
const SETTLE_MS = Number(args['settle-seconds']) * 1000;

interface Side {
  name: string;
  /** Where clients connect: the proxy's port for the broker (node 1), or the bare relay. */
  address: string;
  pid: number;
  rest: { at2s: Rss; atEnd: Rss; peakMb: number; cpuMsPerSecond: number } | null;
  /** VmRSS growth per round 1 s after CONNECTIONS connections were open, MB. */
  connectionsRssMb: number[];
  /** The same, --settle-seconds later. */
  settledRssMb: number[];
}
interface Rss {
  vm: number;
  anon: number;
  file: number;
}

/** A line of /proc/PID/status in MB. */
function statusMb(pid: number, key: string): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1]) / 1024;
}

/** VmRSS, RssAnon and RssFile of a process in MB. */
function rss(pid: number): Rss {
  return { vm: statusMb(pid, 'VmRSS'), anon: statusMb(pid, 'RssAnon'), file: statusMb(pid, 'RssFile') };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const log = (line: string): void => console.log(`[bench] ${line}`);

async function main(): Promise<void> {
  if (!args['no-build']) execFileSync('npm', ['run', 'build', '--silent'], { cwd: repo, stdio: 'inherit' });
  const baselines = (args.baseline ?? '').split(',').filter((d) => d !== '');
  const load: number[] = [os.loadavg()[0]!];
  const loadTimer = setInterval(() => load.push(os.loadavg()[0]!), 5_000);
  const t0 = Date.now();
  log('starting a 1-node Kafka');
  const cluster = await startKafka({ brokers: 1 });
  const nodeId = cluster.brokers[0]!.nodeId;
  const proxies: ProxyProcess[] = [];
  const relays: RelayProcess[] = [];
  const sides: Side[] = [];
  try {
    const builds: [string, string | undefined][] = [
      ['proxy', undefined],
      ...baselines.map((dir, i): [string, string] => [
        i === 0 ? 'baseline' : `baseline${i + 1}`,
        path.join(path.resolve(dir), 'bin/kafka-offset-proxy.js'),
      ]),
    ];
    const started: number[] = [];
    for (const [name, bin] of builds) {
      const proxyArgs = ['--bootstrap-server', cluster.bootstrap, '--log-level', 'info'];
      if (!args['no-http']) proxyArgs.push('--http', `127.0.0.1:${await freePortRange(1)}`);
      if (args.store) proxyArgs.push('--store', args.store);
      const nodeArgs = name === 'proxy' ? args['proxy-node-args'].split(' ').filter((a) => a !== '') : [];
      const proxy = await spawnProxy(proxyArgs, {}, nodeArgs, bin);
      started.push(Date.now());
      proxies.push(proxy);
      const address = `127.0.0.1:${proxy.port + 1 + nodeId}`;
      sides.push({
        name,
        address,
        pid: proxy.child.pid!,
        rest: null,
        connectionsRssMb: [],
        settledRssMb: [],
      });
    }
    const bare = await startBareRelay(await freePortRange(0), cluster.bootstrap);
    started.push(Date.now());
    relays.push(bare);
    sides.push({
      name: 'bare',
      address: bare.address,
      pid: bare.pid,
      rest: null,
      connectionsRssMb: [],
      settledRssMb: [],
    });

    // At rest: every side idle together, from 2 s after the last one started.
    const since = Math.max(...started);
    await sleep(Math.max(0, since + 2000 - Date.now()));
    const at2s = sides.map((s) => ({ rss: rss(s.pid), cpu: cpuMs(s.pid), t: Date.now() }));
    await sleep(REST_MS);
    sides.forEach((s, i) => {
      const cpu = cpuMs(s.pid) - at2s[i]!.cpu;
      s.rest = {
        at2s: at2s[i]!.rss,
        atEnd: rss(s.pid),
        peakMb: statusMb(s.pid, 'VmHWM'),
        cpuMsPerSecond: cpu / ((Date.now() - at2s[i]!.t) / 1000),
      };
      log(`${s.name} at rest: ${JSON.stringify(s.rest)}`);
    });

    for (let round = 0; round < ROUNDS; round++) {
      const before = sides.map((s) => rss(s.pid).vm);
      const open: RawClient[] = [];
      for (const side of round % 2 === 0 ? sides : [...sides].reverse())
        open.push(...(await openIdle(side.address, CONNECTIONS)));
      await sleep(1000);
      sides.forEach((s, i) => s.connectionsRssMb.push(rss(s.pid).vm - before[i]!));
      // V8 gives back heap it no longer needs after some quiet (its memory reducer): the steady cost.
      await sleep(SETTLE_MS);
      sides.forEach((s, i) => s.settledRssMb.push(rss(s.pid).vm - before[i]!));
      for (const s of sides)
        log(
          `round ${round} ${s.name}: VmRSS +${s.connectionsRssMb[round]!.toFixed(1)} MB after 1 s, +${s.settledRssMb[round]!.toFixed(1)} after ${SETTLE_MS / 1000} s, ${CONNECTIONS} connections`,
        );
      for (const c of open) c.close();
      await sleep(SETTLE_MS);
    }
  } finally {
    clearInterval(loadTimer);
    for (const p of proxies) await p.stop();
    for (const r of relays) await r.stop();
    await cluster.stop();
  }
  const f = (x: number, d = 1): string => x.toFixed(d);
  const per1000 = (mb: number): string => f((mb * 1000) / CONNECTIONS);
  console.log(
    [
      '',
      `${CONNECTIONS} idle connections, ${ROUNDS} rounds, ${REST_MS / 1000} s at rest${args['no-http'] ? '' : ', proxies with --http'}; ` +
        `${Math.round((Date.now() - t0) / 1000)} s; load average (1 min) ${f(Math.min(...load))}-${f(Math.max(...load))}`,
      '',
      `| side | RSS at 2 s MB (anon / file) | RSS at rest MB (anon / file) | peak RSS at rest MB | idle CPU ms/s | RSS MB per 1,000 connections after 1 s, by round | the same after ${SETTLE_MS / 1000} s |`,
      '|---|---:|---:|---:|---:|---|---|',
      ...sides.map((s) => {
        const r = s.rest!;
        const mb = (x: Rss): string => `${f(x.vm)} (${f(x.anon)} / ${f(x.file)})`;
        return `| ${s.name} | ${mb(r.at2s)} | ${mb(r.atEnd)} | ${f(r.peakMb)} | ${f(r.cpuMsPerSecond, 2)} | ${s.connectionsRssMb.map(per1000).join(', ')} | ${s.settledRssMb.map(per1000).join(', ')} |`;
      }),
    ].join('\n'),
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
