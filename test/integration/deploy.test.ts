// Each deployment artefact starts a working proxy: the plain Kubernetes manifests (two of their
// instances on one password-protected Redis), the Helm chart's embedded and ZooKeeper examples, and
// the systemd unit with its environment file. Each runs exactly the command line and environment the
// artefact gives the process (the image's ENTRYPOINT and ENV plus the rendered container, or
// ExecStart plus EnvironmentFile), moved onto the bed's addresses, against one 3-broker cluster;
// kafkajs produces, consumes and commits through it, the probes answer, the proxy announces the
// brokers on the ports the Service (or the firewall plan) exposes, an offset change over HTTP is
// refused without the token (401, or 403 where the artefact ships none) and taken with it, and
// SIGTERM stops it with 0. With the chart's http.admin.enabled the admin API answers only on the
// admin port (404 on the http port the probes and /metrics use).
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import {
  createTopics,
  describeCluster,
  fetchCommittedOffsets,
  kafkajsClient,
} from '../bed/clients/kafkajs.js';
import { commitStopResume, expectExactlyRecords, uniqueName } from '../bed/clients/scenarios.js';
import { startKafka } from '../bed/kafka.js';
import type { KafkaCluster } from '../bed/kafka.js';
import { startRedis } from '../bed/redis.js';
import type { RedisServer } from '../bed/redis.js';
import { redisCommand } from '../bed/resp.js';
import {
  brokerPort,
  containerEnvironment,
  dockerImage,
  EXAMPLES_DIR,
  execStart,
  MANIFESTS,
  onlyObject,
  parseObjects,
  parseUnit,
  proxyConfig,
  readValues,
  renderChart,
  renderedSecrets,
  REPO,
  SYSTEMD_DIR,
  unitEnvironment,
  valuesNodeIds,
} from '../harness/deploy.js';
import type { K8sObject, SecretValues } from '../harness/deploy.js';
import { mapToBed, startDeployed } from '../harness/deploy-run.js';
import type { BedMapping, DeployedProxy, MappedLaunch } from '../harness/deploy-run.js';
import { ensureBuilt } from '../harness/proxy.js';

/* eslint-disable @typescript-eslint/no-explicit-any -- rendered manifests are untyped YAML */

const RECORDS = 300;

interface PodLaunch {
  command: string[];
  env: Record<string, string>;
  probes: { liveness: string; readiness: string };
  /** Node id -> the port of its Service port broker-<id>. */
  servicePorts: Map<number, number>;
}

/** What the container of the rendered Deployment runs: the image's ENTRYPOINT and ENV, then the pod's. */
function podLaunch(objects: K8sObject[], secrets: SecretValues): PodLaunch {
  const container = onlyObject(objects, 'Deployment')['spec'].template.spec.containers[0];
  const image = dockerImage();
  const service = objects.find(
    (o) => o.kind === 'Service' && o['spec'].ports.some((p: any) => p.name === 'bootstrap'),
  )!;
  const servicePorts = new Map<number, number>();
  for (const p of service['spec'].ports as any[]) {
    const m = /^broker-(\d+)$/.exec(p.name);
    if (m) servicePorts.set(Number(m[1]), p.port);
  }
  return {
    command: [...(container.command ?? image.entrypoint), ...(container.args ?? [])],
    env: { ...image.env, ...containerEnvironment(container, { ...renderedSecrets(objects), ...secrets }) },
    probes: {
      liveness: container.livenessProbe.httpGet.path,
      readiness: container.readinessProbe.httpGet.path,
    },
    servicePorts,
  };
}

describe.concurrent('deployment artefacts against a 3-broker cluster', () => {
  let cluster: KafkaCluster;
  let redis: RedisServer;
  const redisPassword = `pw-${randomBytes(6).toString('hex')}`;
  const httpToken = randomBytes(18).toString('hex');
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'kop-deploy-'));

  beforeAll(async () => {
    await ensureBuilt();
    [cluster, redis] = await Promise.all([
      startKafka({ brokers: 3 }),
      startRedis({ appendfsync: 'everysec' }),
    ]);
    // The password the manifests' Secret holds; from now on Redis refuses clients without it.
    expect(await redisCommand(redis.host, redis.port, `CONFIG SET requirepass ${redisPassword}`)).toBe('+OK');
    expect(await redisCommand(redis.host, redis.port, 'PING')).toMatch(/^-NOAUTH/);
  });

  afterAll(async () => {
    await Promise.allSettled([cluster?.stop(), redis?.kill()]);
    fs.rmSync(scratch, { recursive: true, force: true });
  });

  /** The node paths of the image: /app is this checkout, `node` this test's node. */
  const imagePaths = (dataDir?: string): Record<string, string> => ({
    [dockerImage().workdir]: REPO,
    ...(dataDir ? { '/data': dataDir } : {}),
  });
  const onBed = (command: string[]) => command.map((w) => (w === 'node' ? process.execPath : w));

  /** The proxy announces every broker of the cluster at the advertised host, on its planned port. */
  async function expectAnnouncedOn(proxy: DeployedProxy, planned: (nodeId: number) => number | undefined) {
    const described = await describeCluster({ bootstrap: proxy.launch.bootstrap });
    expect(described.brokers.map((b) => b.nodeId).sort()).toEqual(
      cluster.brokers.map((b) => b.nodeId).sort(),
    );
    for (const b of described.brokers) {
      expect(b.host, 'the advertised host (mapped onto the bed)').toBe('127.0.0.1');
      expect(b.port - proxy.launch.portShift, `broker ${b.nodeId}'s port`).toBe(planned(b.nodeId));
    }
  }

  async function expectProbes(proxy: DeployedProxy, probes: { liveness: string; readiness: string }) {
    for (const p of [probes.liveness, probes.readiness]) {
      const r = await proxy.get(p);
      expect(r.status, `${p}: ${r.body}`).toBe(200);
    }
  }

  async function storedOffsets(proxy: DeployedProxy, group: string, token?: string): Promise<Stored> {
    const r = await proxy.get(`/admin/groups/${encodeURIComponent(group)}/offsets`, token);
    expect(r.status, r.body).toBe(200);
    return (JSON.parse(r.body).offsets as { topic: string; partition: number; offset: string }[])
      .map((o) => ({ topic: o.topic, partition: o.partition, offset: Number(o.offset) }))
      .sort((a, b) => a.partition - b.partition);
  }

  type Stored = { topic: string; partition: number; offset: number }[];

  /**
   * Admin writes: refused without the token (401; 403 where none is configured) with the store
   * unchanged, and taken with it (the same offset written again, so the group's place stays) and
   * audited.
   */
  async function expectWritesGuarded(proxy: DeployedProxy, group: string, stored: Stored, token?: string) {
    const o = stored[0]!;
    const route = `/admin/groups/${encodeURIComponent(group)}/offsets/${o.topic}/${o.partition}`;
    const anonymous = await proxy.call('PUT', route, { body: { offset: '0', force: true } });
    expect(anonymous.status, anonymous.body).toBe(token === undefined ? 403 : 401);
    expect(await storedOffsets(proxy, group, token)).toEqual(stored);
    if (token === undefined) return;
    const ok = await proxy.call('PUT', route, { token, body: { offset: String(o.offset), force: true } });
    expect(ok.status, ok.body).toBe(200);
    expect(proxy.log()).toMatch(/"event":"admin change".*"result":"ok","who":"http-token"/);
  }

  test('deploy/kubernetes: two instances on one Redis, any instance serving any group', async () => {
    const objects = parseObjects(fs.readFileSync(MANIFESTS.output, 'utf8'));
    const values = readValues(MANIFESTS.values);
    // The Secrets the operator creates (docs/deploy.md).
    const secrets: SecretValues = {};
    const put = (name: string, key: string, value: string) =>
      (secrets[name] = { ...secrets[name], [key]: value });
    put(values.store.passwordSecret.name, values.store.passwordSecret.key, redisPassword);
    put(values.http.existingSecret, values.http.tokenKey, httpToken);
    const pod = podLaunch(objects, secrets);
    const config = proxyConfig([], pod.env);
    expect(config.advertisedHost).toBe(`${MANIFESTS.release}.${MANIFESTS.namespace}.svc.cluster.local`);
    const mapping: BedMapping = {
      addresses: {
        'kafka-bootstrap.kafka.svc:9092': cluster.bootstrap,
        'redis.kafka.svc:6379': `${redis.host}:${redis.port}`,
      },
      paths: imagePaths(),
      nodeIds: valuesNodeIds(MANIFESTS.values),
    };
    // Two pods of the Deployment: the same command and environment (here on different ports).
    const launches: MappedLaunch[] = [];
    for (let i = 0; i < 2; i++) launches.push(await mapToBed(onBed(pod.command), pod.env, mapping));
    expect(launches[0]!.env['KOP_STORE']).toBe(`redis://:${redisPassword}@${redis.host}:${redis.port}/0`);
    const [a, b] = await Promise.all(
      launches.map((l, i) =>
        startDeployed(`manifests-${i}`, l, { cwd: REPO, readinessPath: pod.probes.readiness }),
      ),
    );
    try {
      for (const proxy of [a!, b!]) {
        await expectProbes(proxy, pod.probes);
        await expectAnnouncedOn(proxy, (id) => pod.servicePorts.get(id));
        expect((await proxy.get('/metrics')).status, 'the token protects /metrics').toBe(401);
        expect((await proxy.get('/metrics', httpToken)).status).toBe(200);
      }
      const { topic, group } = await commitStopResume(
        kafkajsClient,
        { bootstrap: a!.launch.bootstrap },
        {
          replicationFactor: 3,
          count: RECORDS,
        },
      );
      // Instance b never saw the group: it serves the offsets instance a committed, from Redis.
      const viaA = await fetchCommittedOffsets({ bootstrap: a!.launch.bootstrap }, group, topic);
      expect(viaA.length).toBeGreaterThan(0);
      expect(await fetchCommittedOffsets({ bootstrap: b!.launch.bootstrap }, group, topic)).toEqual(viaA);
      expect(await storedOffsets(b!, group, httpToken)).toEqual(viaA);
      // And the group goes on through b exactly where it stopped.
      await kafkajsClient.produce(
        { bootstrap: b!.launch.bootstrap },
        { topic, count: 20, start: RECORDS + 10 },
      );
      const more = await kafkajsClient.consume({ bootstrap: b!.launch.bootstrap }, { topic, group, max: 20 });
      expectExactlyRecords(more.records, RECORDS + 10, RECORDS + 30);
      await expectWritesGuarded(b!, group, await storedOffsets(b!, group, httpToken), httpToken);
    } finally {
      const statuses = await Promise.all([a!.stop(), b!.stop()]);
      expect(statuses.map((s) => s.code)).toEqual([0, 0]);
    }
  });

  test('chart examples/embedded.yaml: one instance, offsets kept on its volume across a restart', async () => {
    const file = path.join(EXAMPLES_DIR, 'embedded.yaml');
    const values = readValues(file);
    const objects = parseObjects(renderChart([file], { release: 'kop', namespace: 'kafka' }));
    const pod = podLaunch(objects, {});
    const config = proxyConfig([], pod.env);
    expect(config.store).toBeUndefined();
    // No token in the values: the chart generated one into its Secret.
    const token = pod.env['KOP_HTTP_TOKEN'];
    expect(token?.length).toBeGreaterThanOrEqual(32);
    const dataDir = path.join(scratch, 'embedded-volume');
    const launch = await mapToBed(onBed(pod.command), pod.env, {
      addresses: { [values.kafka.bootstrapServers[0]]: cluster.bootstrap },
      paths: imagePaths(dataDir),
      nodeIds: valuesNodeIds(file),
    });
    expect(launch.env['KOP_DATA_DIR']).toBe(dataDir);
    let proxy = await startDeployed('embedded', launch, { cwd: REPO, readinessPath: pod.probes.readiness });
    let group = '';
    let committed: { topic: string; partition: number; offset: number }[] = [];
    try {
      await expectProbes(proxy, pod.probes);
      await expectAnnouncedOn(proxy, (id) => pod.servicePorts.get(id));
      const report = await commitStopResume(
        kafkajsClient,
        { bootstrap: launch.bootstrap },
        {
          replicationFactor: 3,
          count: RECORDS,
        },
      );
      group = report.group;
      committed = await storedOffsets(proxy, group, token);
      expect(committed.reduce((sum, c) => sum + c.offset, 0)).toBe(RECORDS + 10);
      await expectWritesGuarded(proxy, group, committed, token);
    } finally {
      expect((await proxy.stop()).code).toBe(0);
    }
    // The pod is replaced (Recreate): the new one opens the same volume.
    proxy = await startDeployed('embedded-again', launch, { cwd: REPO, readinessPath: pod.probes.readiness });
    try {
      expect(await storedOffsets(proxy, group, token)).toEqual(committed);
    } finally {
      expect((await proxy.stop()).code).toBe(0);
    }
  });

  test('chart with http.admin.enabled: /admin only on the admin port, probes and /metrics on http', async () => {
    const file = path.join(EXAMPLES_DIR, 'embedded.yaml');
    const values = readValues(file);
    const objects = parseObjects(
      renderChart([file], { release: 'kop', namespace: 'kafka', set: ['http.admin.enabled=true'] }),
    );
    const pod = podLaunch(objects, {});
    const config = proxyConfig([], pod.env);
    const container = onlyObject(objects, 'Deployment')['spec'].template.spec.containers[0];
    const adminContainerPort = container.ports.find((p: any) => p.name === 'admin')?.containerPort;
    expect(config.adminHttp?.port, 'KOP_ADMIN_HTTP is on the container port "admin"').toBe(
      adminContainerPort,
    );
    const adminService = onlyObject(objects, 'Service', 'kop-kafka-offset-proxy-admin');
    expect(adminService['spec'].ports).toEqual([
      { name: 'admin', port: adminContainerPort, targetPort: 'admin', protocol: 'TCP' },
    ]);
    const token = pod.env['KOP_HTTP_TOKEN']!;
    const dataDir = path.join(scratch, 'admin-port-volume');
    const launch = await mapToBed(onBed(pod.command), pod.env, {
      addresses: { [values.kafka.bootstrapServers[0]]: cluster.bootstrap },
      paths: imagePaths(dataDir),
      nodeIds: valuesNodeIds(file),
    });
    expect(launch.adminBase).toBeDefined();
    const proxy = await startDeployed('admin-port', launch, {
      cwd: REPO,
      readinessPath: pod.probes.readiness,
    });
    try {
      await expectProbes(proxy, pod.probes);
      expect((await proxy.get('/metrics', token)).status, '/metrics stays on http').toBe(200);
      const topic = uniqueName('deploy-admin');
      const group = `${topic}-g`;
      await createTopics({ bootstrap: cluster.bootstrap }, [{ topic, partitions: 1, replicationFactor: 3 }]);
      const put = `/admin/groups/${group}/offsets/${topic}/0`;
      const read = `/admin/groups/${group}/offsets`;
      // The http port (the probes' Service): no admin route, even with the token.
      for (const [method, route] of [
        ['PUT', put],
        ['GET', read],
        ['DELETE', `/admin/groups/${group}`],
      ]) {
        const r = await proxy.call(method!, route!, {
          token,
          body: method === 'PUT' ? { offset: '7' } : undefined,
        });
        expect(r.status, `${method} ${route} on http: ${r.body}`).toBe(404);
      }
      // The admin port: the token rules of the admin API; the change is stored and audited.
      const anonymous = await proxy.call('PUT', put, { at: 'admin', body: { offset: '7' } });
      expect(anonymous.status, anonymous.body).toBe(401);
      const ok = await proxy.call('PUT', put, { at: 'admin', token, body: { offset: '7' } });
      expect(ok.status, ok.body).toBe(200);
      const back = await proxy.call('GET', read, { at: 'admin', token });
      expect(back.status, back.body).toBe(200);
      expect(JSON.parse(back.body).offsets.map((o: { offset: string }) => o.offset)).toEqual(['7']);
      expect(await fetchCommittedOffsets({ bootstrap: launch.bootstrap }, group, topic)).toEqual([
        { topic, partition: 0, offset: 7 },
      ]);
      expect(proxy.log()).toMatch(/"event":"admin change".*"result":"ok","who":"http-token"/);
      for (const probe of ['/healthz', '/readyz', '/metrics']) {
        expect((await proxy.call('GET', probe, { at: 'admin', token })).status, `${probe} on admin`).toBe(
          404,
        );
      }
    } finally {
      expect((await proxy.stop()).code).toBe(0);
    }
  });

  test('chart examples/zookeeper.yaml: offsets in ZooKeeper, with the per-group commit guard', async () => {
    const file = path.join(EXAMPLES_DIR, 'zookeeper.yaml');
    const values = readValues(file);
    const objects = parseObjects(renderChart([file], { release: 'kop', namespace: 'kafka' }));
    const pod = podLaunch(objects, {});
    const zk = inject('zkConnect');
    const zkHosts = /^zk:\/\/([^/]+)\//.exec(values.store.url)![1]!.split(',');
    const launch = await mapToBed(onBed(pod.command), pod.env, {
      addresses: {
        [values.kafka.bootstrapServers[0]]: cluster.bootstrap,
        ...Object.fromEntries(zkHosts.map((h) => [h, zk])),
      },
      paths: imagePaths(),
      nodeIds: valuesNodeIds(file),
    });
    expect(launch.env['KOP_STORE']).toMatch(/^zk:\/\/127\.0\.0\.1:\d+,127\.0\.0\.1:\d+\/kafka-offset-proxy$/);
    const proxy = await startDeployed('zookeeper', launch, {
      cwd: REPO,
      readinessPath: pod.probes.readiness,
    });
    try {
      await expectProbes(proxy, pod.probes);
      await expectAnnouncedOn(proxy, (id) => pod.servicePorts.get(id));
      const { topic, group } = await commitStopResume(
        kafkajsClient,
        { bootstrap: launch.bootstrap },
        {
          replicationFactor: 3,
          count: RECORDS,
        },
      );
      expect(await storedOffsets(proxy, group, pod.env['KOP_HTTP_TOKEN'])).toEqual(
        await fetchCommittedOffsets({ bootstrap: launch.bootstrap }, group, topic),
      );
    } finally {
      expect((await proxy.stop()).code).toBe(0);
    }
  });

  test('systemd: ExecStart with the environment file, offsets in the state directory', async () => {
    const unit = parseUnit(fs.readFileSync(path.join(SYSTEMD_DIR, 'kafka-offset-proxy.service'), 'utf8'));
    const envFile = path.join(SYSTEMD_DIR, 'kafka-offset-proxy.env');
    const stateDir = `/var/lib/${unit.get('Service')!.find(([k]) => k === 'StateDirectory')![1]}`;
    // What systemd adds for StateDirectory=, then the unit's own environment.
    const env: Record<string, string> = {
      STATE_DIRECTORY: stateDir,
      ...unitEnvironment(unit, () => envFile),
    };
    const command = execStart(unit);
    const config = proxyConfig(command.slice(2), env);
    const dataDir = path.join(scratch, 'systemd-state');
    fs.mkdirSync(dataDir);
    const launch = await mapToBed(command, env, {
      addresses: Object.fromEntries(
        config.bootstrapServers.map((b, i) => [
          `${b.host}:${b.port}`,
          `${cluster.brokers[i % cluster.brokers.length]!.host}:${cluster.brokers[i % cluster.brokers.length]!.port}`,
        ]),
      ),
      paths: { [command[0]!]: process.execPath, '/opt/kafka-offset-proxy': REPO, [stateDir]: dataDir },
      nodeIds: cluster.brokers.map((b) => b.nodeId),
    });
    expect(launch.env['KOP_DATA_DIR']).toBe(dataDir);
    const proxy = await startDeployed('systemd', launch, { cwd: dataDir, readinessPath: '/readyz' });
    try {
      await expectProbes(proxy, { liveness: '/healthz', readiness: '/readyz' });
      // The environment file's firewall plan: broker N on the listen port + 1 + N.
      await expectAnnouncedOn(proxy, (id) => brokerPort(config, id));
      const { topic, group } = await commitStopResume(
        kafkajsClient,
        { bootstrap: launch.bootstrap },
        {
          replicationFactor: 3,
          count: RECORDS,
        },
      );
      const stored = await storedOffsets(proxy, group, env['KOP_HTTP_TOKEN']);
      expect(stored).toEqual(await fetchCommittedOffsets({ bootstrap: launch.bootstrap }, group, topic));
      // The environment file ships no token: writes are refused until the operator sets one.
      expect(env['KOP_HTTP_TOKEN']).toBeUndefined();
      await expectWritesGuarded(proxy, group, stored);
      expect(
        fs.readdirSync(dataDir).length,
        'the embedded store wrote into the state directory',
      ).toBeGreaterThan(0);
    } finally {
      expect((await proxy.stop()).code).toBe(0);
    }
  });
});
