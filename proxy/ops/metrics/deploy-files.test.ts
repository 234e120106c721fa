// The packaging files cannot be run here (no Docker engine), so their syntax and their agreement
// with the code are checked: every PromQL query of the Grafana dashboard names a metric the proxy
// exports, and the compose file, Prometheus and Grafana provisioning point at each other.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { LagCollector } from '../lag/lag-collector.js';
import { silentLogger } from '../../common/log.js';
import { createProxyMetrics } from './proxy-metrics.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const read = (file: string): string => readFileSync(path.join(repo, file), 'utf8');
const yaml = (file: string): Record<string, any> => parseYaml(read(file)) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

interface Target {
  expr: string;
  datasource?: { uid?: string };
}
interface Panel {
  type: string;
  title: string;
  datasource?: { uid?: string };
  targets?: Target[];
}

/** Every metric name the running proxy exports (histograms with their _bucket/_count/_sum series). */
async function exportedNames(): Promise<Set<string>> {
  const metrics = createProxyMetrics();
  new LagCollector({
    store: { listGroups: async () => [], fetch: async () => [] },
    cluster: {
      metadata: async () => {
        throw new Error('unused');
      },
      request: async () => {
        throw new Error('unused');
      },
    },
    registry: metrics.registry,
    log: silentLogger,
    intervalMs: 1000,
    include: [],
    exclude: [],
    maxGroups: 1,
  });
  const names = new Set<string>();
  for (const m of await metrics.registry.getMetricsAsJSON()) {
    names.add(m.name);
    if (String(m.type) === 'histogram') for (const s of ['_bucket', '_count', '_sum']) names.add(m.name + s);
    if (String(m.type) === 'summary') for (const s of ['_count', '_sum']) names.add(m.name + s);
  }
  return names;
}

const METRIC_NAME = /\b(?:kop|kafka|process|nodejs)_[a-z0-9_]+\b/g;

describe('Grafana dashboard', () => {
  const dashboard = JSON.parse(read('deploy/grafana/dashboards/kafka-offset-proxy.json')) as {
    uid: string;
    panels: Panel[];
    templating: { list: { query: { query: string } }[] };
  };
  const targets = dashboard.panels.flatMap((p) => p.targets ?? []);

  it('has the panels the runbook promises: lag, commits, refusals, requests, latency, store', () => {
    const titles = dashboard.panels.map((p) => p.title.toLowerCase()).join('\n');
    for (const word of ['lag', 'committed', 'refused', 'requests per second', 'latency', 'store latency'])
      expect(titles).toContain(word);
    expect(targets.length).toBeGreaterThan(10);
  });

  it('has job and instance variables, and every query selects by them (no job name written in)', () => {
    const names = dashboard.templating.list.map((v) => (v as unknown as { name: string }).name);
    expect(names).toEqual(expect.arrayContaining(['job', 'instance']));
    for (const t of targets) {
      for (const selector of t.expr.match(/\b(?:kop|kafka|process|nodejs)_[a-z0-9_]+(\{[^}]*\})?/g) ?? []) {
        expect(selector, t.expr).toContain('job=~"$job"');
        expect(selector, t.expr).toContain('instance=~"$instance"');
      }
      expect(t.expr).not.toMatch(/job="/);
    }
  });

  it('queries only metrics the proxy exports', async () => {
    const names = await exportedNames();
    const queries = [...targets.map((t) => t.expr), ...dashboard.templating.list.map((v) => v.query.query)];
    const used = new Set(queries.flatMap((q) => q.match(METRIC_NAME) ?? []));
    expect(used.size).toBeGreaterThan(10);
    const unknown = [...used].filter((n) => !names.has(n));
    expect(unknown).toEqual([]);
  });

  it('uses the provisioned Prometheus datasource', () => {
    const ds = yaml('deploy/grafana/provisioning/datasources/prometheus.yml');
    const uid = ds['datasources'][0].uid as string;
    for (const p of dashboard.panels.filter((x) => x.type !== 'row')) {
      expect(p.datasource?.uid, p.title).toBe(uid);
      for (const t of p.targets ?? []) expect(t.datasource?.uid, p.title).toBe(uid);
    }
    expect(ds['datasources'][0].url).toBe('http://prometheus:9090');
  });
});

describe('docker-compose and Prometheus configuration', () => {
  const compose = yaml('docker-compose.yml');
  const services = compose['services'] as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

  it('brings up Kafka (KRaft), Redis, ZooKeeper, the proxy, Prometheus and Grafana', () => {
    expect(Object.keys(services).sort()).toEqual([
      'grafana',
      'kafka',
      'prometheus',
      'proxy',
      'redis',
      'zookeeper',
    ]);
    expect(services['kafka'].image).toMatch(/^apache\/kafka:/);
    expect(services['kafka'].environment.KAFKA_PROCESS_ROLES).toBe('broker,controller');
    const env = services['proxy'].environment as Record<string, string>;
    expect(env['KOP_BOOTSTRAP_SERVER']).toBe('kafka:9092');
    expect(env['KOP_STORE']).toMatch(/^redis:\/\/redis:6379/);
  });

  it('runs Redis with the durable settings docs/stores.md recommends', () => {
    const args = (services['redis'].command as string[]).join(' ');
    const stores = read('docs/stores.md');
    expect(stores).toMatch(/`appendonly yes` and `appendfsync always`/);
    expect(stores).toMatch(/`maxmemory-policy noeviction`/);
    expect(args).toContain('--appendonly yes');
    expect(args).toContain('--appendfsync always');
    expect(args).toContain('--maxmemory-policy noeviction');
  });

  it('ships no admin token: Prometheus scrapes the open /metrics, published on this machine only', () => {
    const env = services['proxy'].environment as Record<string, string>;
    const httpPort = env['KOP_HTTP']!.split(':')[1];
    const prom = yaml('deploy/prometheus.yml');
    const job = prom['scrape_configs'][0];
    expect(job.static_configs[0].targets).toEqual([`proxy:${httpPort}`]);
    // No token: the proxy refuses admin writes (route-guard.ts) and serves /metrics without one.
    expect(env['KOP_HTTP_TOKEN']).toBeUndefined();
    expect(job.authorization).toBeUndefined();
    expect(services['proxy'].ports).toContain(`127.0.0.1:${httpPort}:${httpPort}`);
    const mounts = (services['prometheus'].volumes as string[]).map((v) => v.split(':')[0]!);
    for (const m of mounts) expect(existsSync(path.join(repo, m)), m).toBe(true);
  });

  it('comments an admin address whose port is published, as KOP_HTTP is, on this machine only', () => {
    const text = read('docker-compose.yml');
    const port = /^ {6}# KOP_ADMIN_HTTP: 0\.0\.0\.0:(\d+)$/m.exec(text)?.[1];
    expect(port, 'a commented KOP_ADMIN_HTTP example').toBeDefined();
    expect(text).toMatch(new RegExp(`^ {6}# - '127\\.0\\.0\\.1:${port}:${port}'$`, 'm'));
    const env = services['proxy'].environment as Record<string, string>;
    expect(env['KOP_HTTP']!.split(':')[1]).not.toBe(port);
  });

  it('mounts the Grafana provisioning where the dashboard provider looks', () => {
    const mounts = services['grafana'].volumes as string[];
    const provider = yaml('deploy/grafana/provisioning/dashboards/kafka-offset-proxy.yml')['providers'][0];
    const dashboardsMount = mounts.find((m) => m.includes(':' + provider.options.path));
    expect(dashboardsMount).toBeDefined();
    expect(existsSync(path.join(repo, dashboardsMount!.split(':')[0]!, 'kafka-offset-proxy.json'))).toBe(
      true,
    );
  });
});

describe('Dockerfile', () => {
  const dockerfile = read('Dockerfile');
  const ignored = read('.dockerignore')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));

  it('is multi-stage on node:20-slim and runs as a non-root user', () => {
    expect(dockerfile.match(/^FROM node:20-slim/gm)).toHaveLength(2);
    expect(dockerfile).toMatch(/^USER node$/m);
    expect(dockerfile).toMatch(/npm ci/);
    expect(dockerfile).toMatch(/npm prune --omit=dev/);
  });

  it('copies from the build context only files that exist and are not ignored', () => {
    const sources = [...dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)].flatMap((m) =>
      m[1]!.split(/\s+/),
    );
    expect(sources.length).toBeGreaterThan(3);
    for (const src of sources) {
      expect(existsSync(path.join(repo, src)), src).toBe(true);
      expect(ignored, src).not.toContain(src);
    }
  });
});
