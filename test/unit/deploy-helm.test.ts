// The Helm chart, checked the way the proxy will see it: `helm lint` and `helm template` (the pinned
// helm) for every documented values example, then the rendered Deployment's environment and flags
// fed to the proxy's own OPTIONS and loadConfig, the Service ports compared with the proxy's port
// rule, the probes with the routes the HTTP endpoint really registers. Starting the proxy from the
// rendered objects is test/integration/deploy.test.ts.
import fs from 'node:fs';
import path from 'node:path';
import { Registry } from 'prom-client';
import { describe, expect, test } from 'vitest';
import { isMap, isScalar, isSeq, parseDocument } from 'yaml';
import type { Node as YamlNode } from 'yaml';
import { parseRedisUrl } from '../../backends/redis-url.js';
import { OPTIONS } from '../../proxy/config.js';
import type { OpsHttpServer } from '../../proxy/ops/http/http-server.js';
import { registerOpsRoutes } from '../../proxy/ops/http/ops-routes.js';
import { tokenProblem } from '../../proxy/ops/http/token-policy.js';
import {
  brokerPort,
  CHART_DIR,
  containerEnvironment,
  dockerImage,
  helm,
  objectsOf,
  onlyObject,
  parseObjects,
  proxyConfig,
  readValues,
  renderChart,
  renderedSecrets,
  REPO,
  templateArgs,
  unknownFlags,
  unknownOptionVariables,
  valuesExamples,
  valuesNodeIds,
} from '../harness/deploy.js';
import type { K8sObject, SecretValues } from '../harness/deploy.js';

/* eslint-disable @typescript-eslint/no-explicit-any -- rendered manifests are untyped YAML */

const NAMESPACE = 'kafka';
/** The token an operator's own Secret holds (what `openssl rand -hex 24` gives). */
const OPERATOR_TOKEN = '5d41402abc4b2a76b9719d911017c592aa1f0e3b9c2d7e84';
const WILDCARD = ['0.0.0.0', '::'];

/** The routes of the proxy's HTTP endpoint, as proxy/ops/http/ops-routes.ts registers them. */
function opsRoutes(): { method: string; path: string; public: boolean }[] {
  const routes: { method: string; path: string; public: boolean }[] = [];
  const recorder = {
    addRoute: (method: string, p: string, _handler: unknown, options: { public?: boolean } = {}) =>
      routes.push({ method, path: p, public: options.public ?? false }),
  };
  registerOpsRoutes(recorder as unknown as OpsHttpServer, {
    registry: new Registry(),
    readiness: { store: async () => {}, broker: async () => {} },
  });
  return routes;
}

/** Every secretKeyRef of the container: rendered Secrets give their values, others a placeholder. */
function secretsFor(container: any, objects: K8sObject[]): SecretValues {
  const rendered = renderedSecrets(objects);
  const secrets: SecretValues = { ...rendered };
  for (const e of container.env ?? []) {
    const ref = e.valueFrom?.secretKeyRef;
    if (ref && !(ref.name in rendered)) {
      // A store URL must be one the proxy accepts, and an admin token random: both are checked at start.
      const value = /url/i.test(ref.key)
        ? `redis://secret-${ref.name}-${ref.key}:6379`
        : e.name === 'KOP_HTTP_TOKEN'
          ? OPERATOR_TOKEN
          : `secret-${ref.name}-${ref.key}`;
      secrets[ref.name] = { ...secrets[ref.name], [ref.key]: value };
    }
  }
  return secrets;
}

/** The Secret names a values file says exist outside the chart. */
function externalSecrets(values: any): string[] {
  return [
    values.http?.existingSecret,
    values.store?.existingSecret,
    values.store?.passwordSecret?.name,
    values.kafka?.sasl?.existingSecret,
  ].filter((n): n is string => typeof n === 'string' && n !== '');
}

const matches = (selector: Record<string, string>, labels: Record<string, string>): boolean =>
  Object.entries(selector).every(([k, v]) => labels[k] === v);

describe.each(valuesExamples())('chart with $name', ({ file }) => {
  const values = readValues(file);
  const render = () => parseObjects(renderChart([file], { release: 'kop', namespace: NAMESPACE }));

  test('helm lint --strict passes', () => {
    const r = helm(['lint', '--strict', CHART_DIR, '--values', file]);
    expect(r.code, r.stdout + r.stderr).toBe(0);
  });

  test('the environment and flags are options the proxy accepts, and it builds its configuration from them', () => {
    const objects = render();
    const deployment = onlyObject(objects, 'Deployment');
    const pod = deployment['spec'].template.spec;
    expect(pod.containers).toHaveLength(1);
    const container = pod.containers[0];
    const image = dockerImage();
    // The image's entrypoint runs the proxy; the chart adds flags only, never its own command.
    expect(container.command).toBeUndefined();
    expect(image.entrypoint.at(-1)).toMatch(/bin\/kafka-offset-proxy\.js$/);
    const args: string[] = container.args ?? [];
    const env = { ...image.env, ...containerEnvironment(container, secretsFor(container, objects)) };

    expect(unknownOptionVariables(env)).toEqual([]);
    expect(unknownFlags(args)).toEqual([]);
    // Variables that are no option exist only to be spliced into a later value ($(NAME)).
    const names: string[] = container.env.map((e: any) => e.name);
    for (const [i, name] of names.entries()) {
      if (name.startsWith('KOP_')) continue;
      const later = container.env.slice(i + 1).map((e: any) => String(e.value ?? ''));
      expect(
        later.some((v: string) => v.includes(`$(${name})`)),
        `${name} is used by a later variable`,
      ).toBe(true);
    }
    expect(new Set(names).size, 'no variable is set twice').toBe(names.length);
    // Kubernetes' service links would add KOP_..._PORT variables for a Service named kop-...
    expect(pod.enableServiceLinks).toBe(false);

    const config = proxyConfig(args, env);
    expect(config.bootstrapServers.map((b) => `${b.host}:${b.port}`)).toEqual(values.kafka.bootstrapServers);
    // Service traffic arrives on the pod's address: both listeners bind every interface.
    expect(WILDCARD).toContain(config.listen.host);
    expect(config.http && WILDCARD.includes(config.http.host)).toBe(true);
    if (config.store?.startsWith('redis')) {
      const target = parseRedisUrl(config.store);
      if (values.store?.passwordSecret?.name) {
        const { name, key } = values.store.passwordSecret;
        expect(target.password).toBe(`secret-${name}-${key}`);
      }
    }
  });

  test('the Service exposes the bootstrap port and exactly the proxy port of each listed node id', () => {
    const objects = render();
    const deployment = onlyObject(objects, 'Deployment');
    const container = deployment['spec'].template.spec.containers[0];
    const env = { ...dockerImage().env, ...containerEnvironment(container, secretsFor(container, objects)) };
    const config = proxyConfig(container.args ?? [], env);
    const nodeIds = valuesNodeIds(file);
    expect(nodeIds.length).toBeGreaterThan(0);
    const expected = [
      { name: 'bootstrap', port: config.listen.port },
      ...nodeIds.map((id) => ({ name: `broker-${id}`, port: brokerPort(config, id) })),
    ];

    const kafkaService = objectsOf(objects, 'Service').find((s) =>
      s['spec'].ports.some((p: any) => p.name === 'bootstrap'),
    )!;
    expect(kafkaService, 'the Service with the bootstrap port').toBeDefined();
    const ports = kafkaService['spec'].ports as any[];
    expect(ports.map((p) => ({ name: p.name, port: p.port }))).toEqual(expected);
    for (const p of ports) {
      expect(p.targetPort).toBe(p.name);
      expect(p.protocol).toBe('TCP');
      if (kafkaService['spec'].type === 'NodePort') expect(p.nodePort, 'node port = port').toBe(p.port);
      else expect(p.nodePort).toBeUndefined();
    }
    const containerPorts = new Map(container.ports.map((p: any) => [p.name, p.containerPort]));
    for (const { name, port } of expected) expect(containerPorts.get(name), name).toBe(port);
    expect(containerPorts.get('http')).toBe(config.http!.port);
    expect(matches(kafkaService['spec'].selector, deployment['spec'].template.metadata.labels)).toBe(true);

    // What clients are told: the Service's DNS name inside the cluster, else the outside address.
    const type = values.service?.type ?? 'ClusterIP';
    const advertised =
      values.listener?.advertisedHost ||
      (type === 'LoadBalancer' ? values.service?.loadBalancerIP : undefined) ||
      `${kafkaService.metadata.name}.${NAMESPACE}.svc.cluster.local`;
    expect(config.advertisedHost).toBe(advertised);

    const byPort = (name: string) =>
      objectsOf(objects, 'Service').filter((s) => s['spec'].ports.some((p: any) => p.name === name));
    const [httpService, ...moreHttp] = byPort('http');
    expect(moreHttp).toEqual([]);
    expect(httpService!['spec'].type).toBe('ClusterIP');
    expect(httpService!['spec'].ports).toEqual([
      { name: 'http', port: config.http!.port, targetPort: 'http', protocol: 'TCP' },
    ]);
    // http.admin.enabled: the admin API's own address, container port and Service; else none of them.
    expect(config.adminHttp !== undefined).toBe(values.http?.admin?.enabled === true);
    const adminServices = byPort('admin');
    expect(objectsOf(objects, 'Service')).toHaveLength(2 + adminServices.length);
    if (config.adminHttp) {
      expect(WILDCARD).toContain(config.adminHttp.host);
      expect(containerPorts.get('admin')).toBe(config.adminHttp.port);
      expect(adminServices).toHaveLength(1);
      expect(adminServices[0]!['spec'].type).toBe('ClusterIP');
      expect(adminServices[0]!['spec'].ports).toEqual([
        { name: 'admin', port: config.adminHttp.port, targetPort: 'admin', protocol: 'TCP' },
      ]);
      expect(matches(adminServices[0]!['spec'].selector, deployment['spec'].template.metadata.labels)).toBe(
        true,
      );
    } else {
      expect(containerPorts.has('admin')).toBe(false);
      expect(adminServices).toEqual([]);
    }
  });

  test('the admin token: from a Secret of the values, or generated into the chart Secret, and taken by the proxy', () => {
    const objects = render();
    const container = onlyObject(objects, 'Deployment')['spec'].template.spec.containers[0];
    const ref = container.env.find((e: any) => e.name === 'KOP_HTTP_TOKEN')?.valueFrom?.secretKeyRef;
    expect(ref, 'KOP_HTTP_TOKEN always comes from a Secret').toBeDefined();
    const env = { ...dockerImage().env, ...containerEnvironment(container, secretsFor(container, objects)) };
    const config = proxyConfig(container.args ?? [], env);
    expect(config.httpToken).toBeDefined();
    if (values.http?.existingSecret) {
      expect(ref).toEqual({ name: values.http.existingSecret, key: values.http.tokenKey ?? 'token' });
    } else {
      const secret = renderedSecrets(objects)[ref.name];
      expect(secret, `the chart renders Secret ${ref.name}`).toBeDefined();
      const token = secret![ref.key]!;
      expect(token).toMatch(values.http?.token ? /./ : /^[A-Za-z0-9]{32,}$/);
      expect(tokenProblem(token)).toBeNull();
    }
  });

  test('liveness is GET /healthz, readiness GET /readyz, both open routes of the HTTP port', () => {
    const objects = render();
    const container = onlyObject(objects, 'Deployment')['spec'].template.spec.containers[0];
    const routes = opsRoutes();
    const probes = { livenessProbe: '/healthz', readinessProbe: '/readyz' } as const;
    for (const [probe, expectedPath] of Object.entries(probes)) {
      const get = container[probe].httpGet;
      expect(get.path, probe).toBe(expectedPath);
      expect(get.port, probe).toBe('http');
      const route = routes.find((r) => r.method === 'GET' && r.path === get.path);
      expect(route, `${get.path} is a route of the HTTP endpoint`).toBeDefined();
      expect(route!.public, `${get.path} needs no token (kubelet sends none)`).toBe(true);
    }
    // /readyz checks the store and a broker with 5 s deadlines at once: the probe must wait longer.
    expect(container.readinessProbe.timeoutSeconds).toBeGreaterThan(5);
  });

  test('the store: the embedded one on its own volume with one replica, a shared one with a disruption budget', () => {
    const objects = render();
    const deployment = onlyObject(objects, 'Deployment');
    const pod = deployment['spec'].template.spec;
    const container = pod.containers[0];
    const env = { ...dockerImage().env, ...containerEnvironment(container, secretsFor(container, objects)) };
    const config = proxyConfig(container.args ?? [], env);
    const podLabels = deployment['spec'].template.metadata.labels;
    if (config.store === undefined) {
      expect(deployment['spec'].replicas).toBe(1);
      expect(deployment['spec'].strategy).toEqual({ type: 'Recreate' });
      const mount = container.volumeMounts.find((m: any) => m.mountPath === config.dataDir);
      expect(mount, `a volume at ${config.dataDir}`).toBeDefined();
      const volume = pod.volumes.find((v: any) => v.name === mount.name);
      const claim = volume.persistentVolumeClaim?.claimName;
      expect(claim, 'a PersistentVolumeClaim').toBeDefined();
      if (!values.persistence?.existingClaim) onlyObject(objects, 'PersistentVolumeClaim', claim);
      expect(objectsOf(objects, 'PodDisruptionBudget')).toEqual([]);
    } else {
      expect(objectsOf(objects, 'PersistentVolumeClaim')).toEqual([]);
      const replicas = deployment['spec'].replicas;
      expect(replicas).toBe(values.replicaCount ?? 1);
      if (replicas > 1) {
        const pdb = onlyObject(objects, 'PodDisruptionBudget');
        expect(matches(pdb['spec'].selector.matchLabels, podLabels)).toBe(true);
        const anti = pod.affinity?.podAntiAffinity;
        const mode = values.podAntiAffinity ?? 'soft';
        if (mode === 'hard') expect(anti.requiredDuringSchedulingIgnoredDuringExecution).toHaveLength(1);
        if (mode === 'soft') expect(anti.preferredDuringSchedulingIgnoredDuringExecution).toHaveLength(1);
      }
    }
  });

  test('certificate paths are files of mounted Secrets, and every secretKeyRef names a Secret that exists', () => {
    const objects = render();
    const pod = onlyObject(objects, 'Deployment')['spec'].template.spec;
    const container = pod.containers[0];
    const env = { ...dockerImage().env, ...containerEnvironment(container, secretsFor(container, objects)) };
    const config = proxyConfig(container.args ?? [], env);
    const files = [
      [config.brokerTls?.ca, values.kafka?.tls?.secretName],
      [config.brokerTls?.cert, values.kafka?.tls?.secretName],
      [config.brokerTls?.key, values.kafka?.tls?.secretName],
      [config.clientTls?.cert, values.clientTls?.secretName],
      [config.clientTls?.key, values.clientTls?.secretName],
      [config.clientTls?.ca, values.clientTls?.secretName],
    ].filter((f): f is [string, string] => f[0] !== undefined);
    for (const [file, secretName] of files) {
      const mount = container.volumeMounts.find((m: any) => path.dirname(file) === m.mountPath);
      expect(mount, `${file} is in a mounted volume`).toBeDefined();
      const volume = pod.volumes.find((v: any) => v.name === mount.name);
      expect(volume.secret?.secretName, file).toBe(secretName);
      expect(mount.readOnly).toBe(true);
    }
    if (values.kafka?.tls?.enabled) expect(config.brokerTls).toBeDefined();
    if (values.clientTls?.enabled) expect(config.clientTls).toBeDefined();

    const rendered = renderedSecrets(objects);
    const external = externalSecrets(values);
    for (const e of container.env) {
      const ref = e.valueFrom?.secretKeyRef;
      if (!ref) continue;
      if (rendered[ref.name]) expect(Object.keys(rendered[ref.name]!), e.name).toContain(ref.key);
      else expect(external, `${e.name}: Secret ${ref.name} is named in the values`).toContain(ref.name);
    }
  });

  test('ServiceMonitor, PodMonitor and the dashboard ConfigMap exactly when enabled', () => {
    const objects = render();
    const deployment = onlyObject(objects, 'Deployment');
    const container = deployment['spec'].template.spec.containers[0];
    const tokenRef = container.env.find((e: any) => e.name === 'KOP_HTTP_TOKEN')?.valueFrom.secretKeyRef;
    const metricsRoute = opsRoutes().find((r) => r.path === '/metrics');
    expect(metricsRoute?.public).toBe(false);
    const services = objectsOf(objects, 'Service');
    const httpService = services.find((s) => s['spec'].ports.some((p: any) => p.name === 'http'))!;

    const checkEndpoint = (endpoint: any) => {
      expect(endpoint.port).toBe('http');
      expect(endpoint.path).toBe('/metrics');
      if (tokenRef) expect(endpoint.authorization).toEqual({ type: 'Bearer', credentials: tokenRef });
      else expect(endpoint.authorization).toBeUndefined();
    };
    const serviceMonitors = objectsOf(objects, 'ServiceMonitor');
    expect(serviceMonitors).toHaveLength(values.metrics?.serviceMonitor?.enabled ? 1 : 0);
    for (const sm of serviceMonitors) {
      const selected = services.filter((s) => matches(sm['spec'].selector.matchLabels, s.metadata['labels']));
      expect(selected, 'it selects the HTTP Service only').toEqual([httpService]);
      expect(sm['spec'].endpoints).toHaveLength(1);
      checkEndpoint(sm['spec'].endpoints[0]);
    }
    const podMonitors = objectsOf(objects, 'PodMonitor');
    expect(podMonitors).toHaveLength(values.metrics?.podMonitor?.enabled ? 1 : 0);
    for (const pm of podMonitors) {
      expect(matches(pm['spec'].selector.matchLabels, deployment['spec'].template.metadata.labels)).toBe(
        true,
      );
      checkEndpoint(pm['spec'].podMetricsEndpoints[0]);
    }

    const dashboards = objectsOf(objects, 'ConfigMap');
    expect(dashboards).toHaveLength(values.grafanaDashboard?.enabled ? 1 : 0);
    const original = JSON.parse(
      fs.readFileSync(path.join(REPO, 'deploy/grafana/dashboards/kafka-offset-proxy.json'), 'utf8'),
    );
    for (const cm of dashboards) {
      expect(cm.metadata['labels']['grafana_dashboard']).toBe('1');
      expect(JSON.parse(cm['data']['kafka-offset-proxy.json'])).toEqual(original);
    }
  });
});

describe('chart', () => {
  test('the dashboard inside the chart is the one of deploy/grafana', () => {
    const copy = fs.readFileSync(path.join(CHART_DIR, 'dashboards/kafka-offset-proxy.json'), 'utf8');
    const original = fs.readFileSync(
      path.join(REPO, 'deploy/grafana/dashboards/kafka-offset-proxy.json'),
      'utf8',
    );
    expect(copy).toBe(original);
  });

  test("appVersion is the proxy's version and the default image tag", () => {
    const chart = readValues(path.join(CHART_DIR, 'Chart.yaml'));
    const pkg = JSON.parse(fs.readFileSync(path.join(REPO, 'package.json'), 'utf8'));
    expect(String(chart.appVersion)).toBe(pkg.version);
    const objects = parseObjects(renderChart([valuesExamples()[0]!.file]));
    const image = onlyObject(objects, 'Deployment')['spec'].template.spec.containers[0].image;
    expect(image).toBe(`kafka-offset-proxy:${pkg.version}`);
  });

  test('every option of the proxy can be set: by its own value, or through extraOptions', () => {
    const template = fs.readFileSync(path.join(CHART_DIR, 'templates/deployment.yaml'), 'utf8');
    const managed: string[] =
      /\$managed := list ((?:"[a-z-]+" ?)+)/.exec(template)?.[1]?.match(/[a-z-]+/g) ?? [];
    expect(managed.length).toBeGreaterThan(0);
    const names = OPTIONS.map((o) => o.name);
    expect(
      managed.filter((m) => !names.includes(m)),
      'chart values for options that do not exist',
    ).toEqual([]);
    const rest = names.filter((n) => !managed.includes(n));
    const objects = parseObjects(
      renderChart([valuesExamples()[0]!.file], { set: rest.map((n) => `extraOptions.${n}=x`) }),
    );
    const env = onlyObject(objects, 'Deployment')['spec'].template.spec.containers[0].env.map(
      (e: any) => e.name,
    );
    for (const n of rest) expect(env, n).toContain(`KOP_${n.toUpperCase().replace(/-/g, '_')}`);
  });

  const refusals: { name: string; set: string[]; message: RegExp }[] = [
    {
      name: 'no bootstrap servers',
      set: ['kafka.bootstrapServers=null'],
      message: /kafka.bootstrapServers is required/,
    },
    {
      name: 'no broker node ids',
      set: ['brokers.nodeIds=null'],
      message: /brokers.nodeIds or brokers.nodeIdRange/,
    },
    {
      name: 'the embedded store with 2 replicas',
      set: ['replicaCount=2'],
      message: /embedded store .* replicaCount/,
    },
    {
      name: 'a LoadBalancer without an address',
      set: ['service.type=LoadBalancer'],
      message: /set listener.advertisedHost/,
    },
    {
      name: 'a password Secret the URL does not use',
      set: ['store.url=redis://redis:6379', 'store.passwordSecret.name=redis'],
      message: /\$\(STORE_PASSWORD\)/,
    },
    {
      name: 'a broker port on the HTTP port',
      set: ['brokers.ports.1=9464'],
      message: /already the http port/,
    },
    {
      name: 'the admin port on the HTTP port',
      set: ['http.admin.enabled=true', 'http.admin.port=9464'],
      message: /http.admin.port 9464 is already the http port/,
    },
    {
      name: 'a broker port on the admin port',
      set: ['http.admin.enabled=true', 'brokers.ports.1=9465'],
      message: /already the admin port/,
    },
    { name: 'a node id past the port range', set: ['brokers.nodeIds={70000}'], message: /outside 1-65535/ },
    {
      name: 'an admin token too short for the proxy',
      set: ['http.token=change-me'],
      message: /http.token is shorter than 16 characters/,
    },
    {
      name: 'a chart-managed option in extraOptions',
      set: ['extraOptions.store=memory://'],
      message: /own value/,
    },
  ];
  test('generates a new random token on each install, and takes a given one as it is', () => {
    const embedded = valuesExamples().find((e) => e.name === 'examples/embedded.yaml')!.file;
    const tokenOf = (set: string[] = []) => {
      const secrets = renderedSecrets(parseObjects(renderChart([embedded], { set })));
      return secrets['kop-kafka-offset-proxy-secrets']?.['http-token'];
    };
    const [a, b] = [tokenOf(), tokenOf()];
    expect(a).toMatch(/^[A-Za-z0-9]{32}$/);
    expect(b).toMatch(/^[A-Za-z0-9]{32}$/);
    expect(a).not.toBe(b);
    expect(tokenOf([`http.token=${OPERATOR_TOKEN}`])).toBe(OPERATOR_TOKEN);
    // A Secret of the operator's own: the chart renders none for the token.
    expect(tokenOf(['http.existingSecret=mine'])).toBeUndefined();
  });

  test('keeps the generated token across upgrades: it reads it back from the Secret (lookup)', () => {
    const helpers = fs.readFileSync(path.join(CHART_DIR, 'templates/_helpers.tpl'), 'utf8');
    // helm template cannot reach a cluster, so the lookup branch is checked as text.
    expect(helpers).toMatch(/lookup "v1" "Secret" \.Release\.Namespace \(include "kop\.secretName" \.\)/);
    expect(helpers).toMatch(/\$kept \| b64dec/);
    expect(helpers).toMatch(/randAlphaNum 32/);
  });

  test.each(refusals)('refuses $name with a message', ({ set, message }) => {
    const embedded = valuesExamples().find((e) => e.name === 'examples/embedded.yaml')!.file;
    const r = helm(templateArgs([embedded], { set }));
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(message);
  });
});

describe('chart documentation', () => {
  const valuesFile = path.join(CHART_DIR, 'values.yaml');
  const doc = parseDocument(fs.readFileSync(valuesFile, 'utf8'));

  /** Every leaf value's path (a.b.c), with whether it or an enclosing key carries a comment. */
  function leaves(node: YamlNode | null, prefix: string, commented: boolean, out: [string, boolean][]): void {
    if (isMap(node) && node.items.length > 0) {
      for (const [i, pair] of node.items.entries()) {
        const key = pair.key as YamlNode;
        const name = String(isScalar(key) ? key.value : key);
        // The yaml package keeps the comment above a block's first key on the block itself.
        const own =
          Boolean(key.commentBefore) ||
          (i === 0 && Boolean(node.commentBefore)) ||
          Boolean((pair.value as YamlNode | null)?.comment);
        leaves(pair.value as YamlNode | null, prefix ? `${prefix}.${name}` : name, commented || own, out);
      }
    } else {
      out.push([prefix, commented || (isSeq(node) && Boolean(node.commentBefore))]);
    }
  }
  const all: [string, boolean][] = [];
  leaves(doc.contents as YamlNode, '', false, all);

  test('every value in values.yaml has a comment (on itself or the block it is in)', () => {
    expect(all.length).toBeGreaterThan(50);
    expect(all.filter(([, c]) => !c).map(([p]) => p)).toEqual([]);
  });

  test('the chart README documents exactly the values of values.yaml', () => {
    const readme = fs.readFileSync(path.join(CHART_DIR, 'README.md'), 'utf8');
    const documented = [...readme.matchAll(/^\| `([A-Za-z0-9_.]+)` \|/gm)].map((m) => m[1]!);
    expect(documented.length).toBeGreaterThan(50);
    // A row may stand for a whole block (`resources`) whose keys are Kubernetes' own.
    const covers = (row: string, leaf: string) => leaf === row || leaf.startsWith(`${row}.`);
    const paths = all.map(([p]) => p);
    expect(
      paths.filter((p) => !documented.some((row) => covers(row, p))),
      'missing from README.md',
    ).toEqual([]);
    expect(
      documented.filter((row) => !paths.some((p) => covers(row, p))),
      'in README.md but not in values.yaml',
    ).toEqual([]);
    expect(new Set(documented).size, 'each value documented once').toBe(documented.length);
  });
});
