// Operations end to end: the real CLI with --http, a kafkajs group committing through it, and a real
// Prometheus server scraping /metrics (with the bearer token). Every assertion goes through
// Prometheus' query API, so names, labels and values are checked as a dashboard would see them.
// Lag is also compared with what kafka-consumer-groups reports (commits mirrored to the broker).
import fs from 'node:fs';
import path from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { describeConsumerGroup } from '../bed/clients/kafka-tools.js';
import { consume, createTopics, produce } from '../bed/clients/kafkajs.js';
import { freePort } from '../bed/ports.js';
import { makeRunDir, removeRunDir, spawnManaged, waitUntil } from '../bed/process.js';
import type { ManagedProcess } from '../bed/process.js';
import { ensureBuilt, spawnProxy } from '../harness/proxy.js';
import type { ProxyProcess } from '../harness/proxy.js';

const TOKEN = 'ops-scrape-4e1d9b7c02a8';

interface PromSample {
  metric: Record<string, string>;
  value: [number, string];
}

describe('Prometheus scraping the proxy', () => {
  const kafka = inject('kafkaBootstrap');
  const classpath = inject('kafkaClasspath');
  const suffix = Math.random().toString(36).slice(2, 8);
  const topic = `ops-prom-${suffix}`;
  const group = `ops-prom-group-${suffix}`;
  let proxy: ProxyProcess;
  let prometheus: ManagedProcess;
  let runDir: string;
  let httpUrl: string;
  let promUrl: string;

  async function query(promql: string): Promise<PromSample[]> {
    const res = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(promql)}`);
    const body = (await res.json()) as { status: string; data: { result: PromSample[] }; error?: string };
    if (body.status !== 'success') throw new Error(`query ${promql}: ${body.error}`);
    return body.data.result;
  }

  /** Waits until `promql` returns exactly one sample equal to `want` (Prometheus scrapes every 1 s). */
  async function eventually(promql: string, want: number, timeoutMs = 60_000): Promise<void> {
    let last: PromSample[] = [];
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      last = await query(promql);
      if (last.length === 1 && Number(last[0]!.value[1]) === want) return;
      await new Promise((r) => setTimeout(r, 500));
    }
    throw new Error(`${promql}: wanted ${want}, last result ${JSON.stringify(last)}`);
  }

  beforeAll(async () => {
    await ensureBuilt();
    await createTopics({ bootstrap: kafka }, [{ topic, partitions: 3 }]);
    const httpPort = await freePort();
    httpUrl = `http://127.0.0.1:${httpPort}`;
    proxy = await spawnProxy([
      '--bootstrap-server',
      kafka,
      '--store',
      'memory://',
      '--http',
      `127.0.0.1:${httpPort}`,
      '--http-token',
      TOKEN,
      '--lag-interval-ms',
      '500',
      '--lag-groups-exclude',
      'ops-excluded-*',
      '--mirror-commits',
    ]);

    runDir = makeRunDir('prometheus');
    const promPort = await freePort();
    promUrl = `http://127.0.0.1:${promPort}`;
    const configFile = path.join(runDir, 'prometheus.yml');
    fs.writeFileSync(
      configFile,
      [
        'global:',
        '  scrape_interval: 1s',
        '  scrape_timeout: 900ms',
        'scrape_configs:',
        '  - job_name: kafka-offset-proxy',
        '    authorization:',
        `      credentials: ${TOKEN}`,
        '    static_configs:',
        `      - targets: ['127.0.0.1:${httpPort}']`,
        '',
      ].join('\n'),
    );
    prometheus = spawnManaged({
      name: 'prometheus',
      command: '/usr/bin/prometheus',
      args: [
        `--config.file=${configFile}`,
        `--storage.tsdb.path=${path.join(runDir, 'data')}`,
        `--web.listen-address=127.0.0.1:${promPort}`,
        '--log.level=warn',
      ],
      logFile: path.join(runDir, 'prometheus.log'),
    });
    await waitUntil('Prometheus ready', async () => (await fetch(`${promUrl}/-/ready`)).ok, {
      timeoutMs: 60_000,
      proc: prometheus,
    });
  });

  afterAll(async () => {
    await prometheus?.stop();
    await proxy?.stop();
    if (runDir) removeRunDir(runDir);
  });

  test('the proxy is a healthy, authenticated target', async () => {
    expect((await fetch(`${httpUrl}/metrics`)).status).toBe(401);
    expect((await fetch(`${httpUrl}/healthz`)).status).toBe(200);
    const ready = await fetch(`${httpUrl}/readyz`);
    expect(await ready.json()).toMatchObject({
      status: 'ready',
      checks: { store: { ok: true }, broker: { ok: true } },
    });
    expect(ready.status).toBe(200);
    await eventually('up{job="kafka-offset-proxy"}', 1);
  });

  test('commits, requests and lag are visible in Prometheus; lag follows production', async () => {
    // A long-running member (as in production): its commits are mirrored to the broker while it is
    // still in the group, so kafka-consumer-groups can be compared with the proxy's lag.
    const consumer = new Kafka({
      clientId: 'ops-prom',
      brokers: [proxy.bootstrap],
      logLevel: logLevel.NOTHING,
    }).consumer({ groupId: group, sessionTimeout: 10_000, heartbeatInterval: 500, maxWaitTimeInMs: 100 });
    let consumed = 0;
    await consumer.connect();
    try {
      await consumer.subscribe({ topics: [topic], fromBeginning: true });
      await consumer.run({
        eachMessage: async () => {
          consumed++;
        },
      });
      await produce({ bootstrap: proxy.bootstrap }, { topic, count: 30 });
      await waitUntil('30 records consumed', async () => consumed === 30, { timeoutMs: 60_000 });

      // Everything consumed and committed: lag 0 over the group's partitions.
      await eventually(`kafka_consumergroup_lag_sum{consumergroup="${group}"}`, 0);
      await eventually(`sum(kafka_consumergroup_current_offset{consumergroup="${group}"})`, 30);
      await eventually(`count(kafka_consumergroup_lag{consumergroup="${group}",topic="${topic}"})`, 3);
      const accepted = await query('kop_commits_total{result="accepted"}');
      expect(Number(accepted[0]?.value[1])).toBeGreaterThanOrEqual(3);
      await eventually('kop_commit_refusals_total{reason="fence"}', 0);
      const positive = async (promql: string): Promise<void> => {
        const r = await query(promql);
        expect(r, promql).toHaveLength(1);
        expect(Number(r[0]!.value[1]), promql).toBeGreaterThan(0);
      };
      await positive('sum(kop_requests_total{api="OffsetCommit",answered_by="proxy"})');
      await positive('sum(kop_requests_total{api="OffsetFetch",answered_by="proxy"})');
      await positive('sum(kop_requests_total{api="Produce",answered_by="broker"})');
      await positive('sum(kop_requests_total{api="JoinGroup",answered_by="broker"})');
      await positive('sum(kop_request_duration_seconds_count{api="OffsetFetch",answered_by="proxy"})');
      await positive('sum(kop_store_operation_duration_seconds_count{store="memory",operation="commit"})');
      await positive('kop_bytes_total{direction="client_in"}');
      await positive('kop_bytes_total{direction="broker_out"}');
      await positive('kop_connections_active{side="client"}');
      await positive('process_resident_memory_bytes{job="kafka-offset-proxy"}');
      await eventually('kop_store_errors_total{operation="commit"}', 0);
      await waitUntil(
        'a mirrored commit',
        async () => Number((await query('kop_mirrored_commits_total{result="ok"}'))[0]?.value[1]) > 0,
        { timeoutMs: 30_000 },
      );

      // 12 more records the member does not consume: the group lags by exactly 12.
      consumer.pause([{ topic }]);
      await produce({ bootstrap: proxy.bootstrap }, { topic, count: 12, start: 30 });
      await eventually(`kafka_consumergroup_lag_sum{consumergroup="${group}"}`, 12);
      await eventually(`sum(kafka_consumergroup_lag{consumergroup="${group}",topic="${topic}"})`, 12);
      await eventually(`sum(kafka_topic_partition_current_offset{topic="${topic}"})`, 42);
      const age = await query(`max(kop_consumergroup_last_commit_age_seconds{consumergroup="${group}"})`);
      expect(Number(age[0]?.value[1])).toBeGreaterThanOrEqual(0);

      // The same offsets and lag per partition as kafka-consumer-groups reports at the broker.
      const rows = (await describeConsumerGroup(classpath, { bootstrap: kafka }, group)).filter(
        (r) => r.topic === topic,
      );
      const perPartition = async (metric: string): Promise<Record<number, number>> =>
        Object.fromEntries(
          (await query(`${metric}{consumergroup="${group}",topic="${topic}"}`)).map((s) => [
            Number(s.metric['partition']),
            Number(s.value[1]),
          ]),
        );
      expect(rows.reduce((sum, r) => sum + (r.lag ?? 0), 0)).toBe(12);
      expect(await perPartition('kafka_consumergroup_lag')).toEqual(
        Object.fromEntries(rows.map((r) => [r.partition, r.lag])),
      );
      expect(await perPartition('kafka_consumergroup_current_offset')).toEqual(
        Object.fromEntries(rows.map((r) => [r.partition, r.currentOffset])),
      );

      // Consuming the rest brings the lag back to 0.
      consumer.resume([{ topic }]);
      await waitUntil('42 records consumed', async () => consumed === 42, { timeoutMs: 60_000 });
      await eventually(`kafka_consumergroup_lag_sum{consumergroup="${group}"}`, 0);
    } finally {
      await consumer.disconnect();
    }
  });

  test('excluded groups get no lag series', async () => {
    const excluded = `ops-excluded-${suffix}`;
    const r = await consume({ bootstrap: proxy.bootstrap }, { topic, group: excluded, max: 5 });
    expect(r.records).toHaveLength(5);
    // The included group's series keep coming, the excluded one's never appear.
    await eventually(`count(kafka_consumergroup_lag_sum{consumergroup="${group}"})`, 1);
    await new Promise((resolve) => setTimeout(resolve, 4_000));
    expect(await query(`kafka_consumergroup_lag_sum{consumergroup="${excluded}"}`)).toEqual([]);
  });

  test('every query of the Grafana dashboard is valid PromQL and finds data', async () => {
    const dashboard = JSON.parse(
      fs.readFileSync(
        new URL('../../deploy/grafana/dashboards/kafka-offset-proxy.json', import.meta.url),
        'utf8',
      ),
    ) as { panels: { title: string; targets?: { expr: string }[] }[] };
    const exprs = dashboard.panels.flatMap((p) =>
      (p.targets ?? []).map((t) => ({ title: p.title, expr: t.expr })),
    );
    expect(exprs.length).toBeGreaterThan(10);
    let withData = 0;
    for (const { title, expr } of exprs) {
      const promql = expr
        .replaceAll('$__rate_interval', '10s')
        .replaceAll('$group', '.*')
        .replaceAll('$job', '.*')
        .replaceAll('$instance', '.*');
      const result = await query(promql); // throws on a syntax error
      if (result.length > 0) withData++;
      else console.log(`dashboard panel "${title}" has no data yet: ${promql}`);
    }
    // Refusals, rejected frames and connect failures may legitimately be 0-rate, not absent.
    expect(withData).toBe(exprs.length);
  });
});
