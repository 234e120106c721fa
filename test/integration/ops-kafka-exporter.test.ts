// The proxy's lag series are the Kafka exporter's (danielqsj/kafka_exporter): for a fixed scenario
// the proxy exports exactly the consumer-group lines the real kafka_exporter exported, pointed at
// the proxy (test/golden/kafka-exporter/). And with two proxies on one Redis, one exports them:
// each series once, and again after the exporting proxy is killed.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, inject, test } from 'vitest';
import { uniqueName } from '../bed/clients/scenarios.js';
import { ensureBuilt, spawnProxy } from '../harness/proxy.js';
import type { ProxyProcess } from '../harness/proxy.js';
import { exporterScenario, normalizeSeries } from './ops-kafka-exporter-scenario.js';

const broker = inject('kafkaBootstrap');
const GOLDEN = readFileSync(path.resolve('test/golden/kafka-exporter/series.txt'), 'utf8').trim().split('\n');

async function withHttp(args: string[]): Promise<{ proxy: ProxyProcess; metrics: () => Promise<string> }> {
  await ensureBuilt();
  const proxy = await spawnProxy([
    '--bootstrap-server',
    broker,
    '--http',
    '127.0.0.1:0',
    '--lag-interval-ms',
    '300',
    ...args,
  ]);
  let port: number | undefined;
  for (let i = 0; port === undefined; i++) {
    const line = proxy
      .output()
      .split('\n')
      .find((l) => l.includes('"http listening"'));
    if (line) port = (JSON.parse(line) as { port: number }).port;
    else if (i > 200) throw new Error(`no HTTP endpoint:\n${proxy.output()}`);
    else await new Promise((r) => setTimeout(r, 50));
  }
  return { proxy, metrics: async () => (await fetch(`http://127.0.0.1:${port}/metrics`)).text() };
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const gauge = (text: string, name: string): number | undefined => {
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
};

describe('lag series', () => {
  const running: ProxyProcess[] = [];
  afterAll(async () => {
    for (const p of running) await p.stop('SIGKILL');
  });

  test('are the lines the real kafka_exporter exports for the same groups', async () => {
    const { proxy, metrics } = await withHttp([]);
    running.push(proxy);
    const s = await exporterScenario(broker, proxy.bootstrap);
    let last: string[] = [];
    await until('the lag series of both groups', async () => {
      last = normalizeSeries(await metrics(), s);
      return last.length === GOLDEN.length ? last : undefined;
    }).catch(() => undefined);
    expect(last).toEqual(GOLDEN);
  });

  test('two proxies on one Redis: one exports each series, and another after it is killed', async () => {
    const store = `${inject('redisUrl')}?prefix=${uniqueName('lease')}`;
    const a = await withHttp(['--store', store]);
    const b = await withHttp(['--store', store]);
    running.push(a.proxy, b.proxy);
    const s = await exporterScenario(broker, a.proxy.bootstrap);
    const both = async () => {
      const [ta, tb] = await Promise.all([a.metrics(), b.metrics()]);
      return { ta, tb, lines: [...normalizeSeries(ta, s), ...normalizeSeries(tb, s)].sort() };
    };
    const first = await until('one full set of series', async () => {
      const x = await both();
      return x.lines.length >= GOLDEN.length ? x : undefined;
    });
    expect(first.lines).toEqual(GOLDEN);
    expect([gauge(first.ta, 'kop_lag_exporter'), gauge(first.tb, 'kop_lag_exporter')].sort()).toEqual([0, 1]);

    // Kill the exporter (no release): its lease lapses (3 intervals, at least 3 s) and the other takes over.
    const [exporter, survivor] = gauge(first.ta, 'kop_lag_exporter') === 1 ? [a, b] : [b, a];
    await exporter.proxy.stop('SIGKILL');
    const after = await until(
      'the other proxy to export',
      async () => {
        const t = await survivor.metrics();
        return gauge(t, 'kop_lag_exporter') === 1 && normalizeSeries(t, s).length === GOLDEN.length
          ? t
          : undefined;
      },
      20_000,
    );
    expect(normalizeSeries(after, s)).toEqual(GOLDEN);
  });
});
