// TLS from the proxy to real SSL brokers (issues #4 and #7): the bed's Kafka serves its client
// listener as SSL with ssl.client.auth=required, certificates made by openssl at test time (the
// broker's names 127.0.0.1; the proxy's client certificate is signed by the CA the broker trusts).
// A second broker serves SASL_SSL without client certificates.
//
// Clients reach the proxy in plaintext or over TLS; every connection of the proxy to the broker is
// TLS with the proxy's client certificate: the relayed client connections, and the proxy's own
// cluster connections (broker discovery, topic lookups of --unknown-topics reject, coordinator
// lookups, member checks and --mirror-commits, /readyz). Without a certificate the broker accepts,
// or with a broker certificate the proxy does not trust, clients are closed at once and the proxy
// says why. The CLI tests run dist/: `npm run build` first.
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { Kafka, logLevel } from 'kafkajs';
import type { KafkaConfig } from 'kafkajs';
import { MemoryStore } from '../../backends/memory-store.js';
import { ApiKey } from '../../protocol/messages/index.js';
import type { MetadataResponse } from '../../protocol/messages/metadata-response.js';
import { ConfigError, loadConfig } from '../../proxy/config.js';
import { createLogger } from '../../proxy/logger.js';
import { createOffsetService } from '../../proxy/offsets/setup.js';
import type { OffsetServiceHandle } from '../../proxy/offsets/setup.js';
import type { UpstreamTls } from '../../proxy/core/upstream-socket.js';
import { javaClient } from '../bed/clients/java.js';
import type { JavaClient } from '../bed/clients/java.js';
import { produceAndConsume } from '../bed/clients/scenarios.js';
import { startKafka } from '../bed/kafka.js';
import type { KafkaCluster } from '../bed/kafka.js';
import { makeTestCerts } from '../harness/certs.js';
import type { TestCerts } from '../harness/certs.js';
import { kafkajsRoundTrip } from '../harness/kafkajs-roundtrip.js';
import { spawnProxy, startProxy } from '../harness/proxy.js';
import type { RunningProxy } from '../harness/proxy.js';
import { RawClient, metadataRequest, metadataRequestBody } from '../harness/raw-client.js';

let certs: TestCerts;
let cluster: KafkaCluster;
/** SASL_SSL on the client listener, no client certificates: the most common production shape. */
let saslCluster: KafkaCluster;
let java: JavaClient;

beforeAll(async () => {
  certs = makeTestCerts();
  const tls = {
    cert: certs.files.serverCert,
    key: certs.files.serverKey,
    ca: certs.files.ca,
    clientAuth: 'required',
  } as const;
  [cluster, saslCluster, java] = await Promise.all([
    startKafka({ tls }),
    startKafka({ sasl: true, tls: { cert: tls.cert, key: tls.key } }),
    javaClient(inject('kafkaClasspath')),
  ]);
}, 180_000);
afterAll(async () => {
  await Promise.all([cluster?.stop(), saslCluster?.stop()]);
  certs?.remove();
});

/** The proxy's TLS towards the broker: the CA that signed the broker, and a client certificate. */
const trusted = (): UpstreamTls => ({
  ca: certs.ca,
  cert: certs.clientCert,
  key: certs.clientKey,
  rejectUnauthorized: true,
});

/** kafkajs straight to the SSL broker, with the client certificate: what the broker itself holds. */
function direct(): Kafka {
  return new Kafka({
    brokers: cluster.bootstrap.split(','),
    ssl: { ca: [certs.ca], cert: certs.clientCert, key: certs.clientKey },
    logLevel: logLevel.NOTHING,
    retry: { retries: 3 },
  });
}

function expectProxyPorts(brokers: { nodeId: number; host: string; port: number }[], port: number): void {
  expect(brokers.map((b) => b.nodeId)).toEqual(cluster.brokers.map((b) => b.nodeId));
  for (const b of brokers) {
    expect(b.host).toBe('127.0.0.1');
    expect(b.port).toBe(port + 1 + b.nodeId);
  }
}

interface TlsOffsetProxy extends RunningProxy {
  offsets: OffsetServiceHandle;
  store: MemoryStore;
  /** Everything the proxy logged, one JSON line each. */
  logs(): string;
}

/**
 * The proxy with the offset service, in-process, as the CLI builds it: the relayed connections and
 * the cluster client both use `brokerTls`, and brokers are discovered through the cluster client.
 */
async function startTlsOffsetProxy(
  brokerTls: UpstreamTls,
  flags: string[] = [],
  brokers: KafkaCluster = cluster,
): Promise<TlsOffsetProxy> {
  const lines: string[] = [];
  const log = createLogger('debug', {}, (line) => lines.push(line));
  const config = loadConfig(
    ['--bootstrap-server', brokers.bootstrap, '--request-timeout-ms', '5000', ...flags],
    {},
  );
  const store = new MemoryStore();
  const offsets = createOffsetService(config, store, brokerTls, log);
  const running = await startProxy(brokers.bootstrap, {
    brokerTls,
    extension: offsets.service,
    requestTimeoutMs: 5_000,
    log,
    discoverBrokers: async () =>
      (await offsets.cluster.metadata([])).brokers.map((b) => ({
        nodeId: b.nodeId,
        address: { host: b.host, port: b.port },
      })),
  });
  return {
    ...running,
    offsets,
    store,
    logs: () => lines.join('\n'),
    stop: async () => {
      await running.stop();
      await offsets.close();
    },
  };
}

/** A Kafka request on a fresh connection to `bootstrap` gets no answer: the proxy closes it promptly. */
async function expectClosedWithoutAnswer(bootstrap: string): Promise<void> {
  const client = await RawClient.connect(bootstrap);
  try {
    client.write(metadataRequest(12, 1));
    // Not "only 0 of 1 frames within 5000 ms": closed, without an answer.
    await expect(client.read(1, 5_000)).rejects.toThrow(/connection closed after 0 of 1 frames/);
  } finally {
    client.close();
  }
}

describe('the bed: an SSL broker requiring client certificates', () => {
  test('serves TLS clients with a trusted certificate, and nobody else', async () => {
    expect(cluster.securityProtocol).toBe('SSL');
    const admin = direct().admin();
    await admin.connect();
    const { brokers } = await admin.describeCluster();
    await admin.disconnect();
    expect(brokers).toEqual(cluster.brokers.map((b) => expect.objectContaining(b)));

    // Plaintext Kafka on the SSL port is not a TLS hello.
    const plain = await RawClient.connect(cluster.bootstrap);
    plain.write(metadataRequest(12, 1));
    expect(await plain.closesWithin(5_000)).toBe(true);
    // TLS without a client certificate: the handshake completes on the client's side (TLS 1.3), the
    // broker's verdict follows, and nothing is answered.
    const anonymous = await RawClient.connect(cluster.bootstrap, { tls: { ca: [certs.ca] } });
    anonymous.write(metadataRequest(12, 1));
    await expect(anonymous.read(1, 5_000)).rejects.toThrow(/closed/);
  });
});

describe('proxy → SSL broker with a client certificate', () => {
  let proxy: TlsOffsetProxy;
  beforeAll(async () => {
    proxy = await startTlsOffsetProxy(trusted(), ['--unknown-topics', 'reject', '--mirror-commits']);
  });
  afterAll(async () => {
    await proxy?.stop();
  });

  test('the proxy discovered the broker over TLS, through its cluster client', async () => {
    const [broker] = cluster.brokers;
    expect(proxy.proxy.brokers.upstreamOf(broker!.nodeId)).toEqual({ host: '127.0.0.1', port: broker!.port });
    // The offset service's lookups (topics for --unknown-topics reject) go over the same TLS.
    expect(await proxy.offsets.lookups.topicExists('__consumer_offsets', 0)).toBe(true);
    expect(await proxy.offsets.lookups.topicExists('kop-no-such-topic', 0)).toBe(false);
    // Clients see only the proxy, also on a raw Metadata request.
    const raw = await RawClient.connect(proxy.bootstrap);
    const body = await raw.request<MetadataResponse>(ApiKey.Metadata, 12, 1, metadataRequestBody());
    raw.close();
    expectProxyPorts(body.brokers, proxy.port);
  });

  test('kafkajs produces, consumes in a group and commits through the plaintext listener', async () => {
    const target = { bootstrap: proxy.bootstrap };
    const r = await kafkajsRoundTrip({ brokers: [proxy.bootstrap] }, target, 100);
    expect(r.values.sort()).toEqual(Array.from({ length: 100 }, (_, i) => `v${i}`).sort());
    expect(r.committed).toBe(100);
    expectProxyPorts(r.brokers, proxy.port);

    // The commits are in the proxy's store ...
    const group = `${r.topic}-group`;
    const stored = await proxy.store.fetch(group, null);
    expect(stored.reduce((sum, o) => sum + Number(o.offset), 0)).toBe(100);
    // ... and mirrored to the broker by the cluster client, over TLS with the client certificate.
    const admin = direct().admin();
    await admin.connect();
    try {
      const deadline = Date.now() + 15_000;
      let atBroker = 0;
      while (atBroker !== 100 && Date.now() < deadline) {
        const topics = await admin.fetchOffsets({ groupId: group, topics: [r.topic] });
        atBroker = topics.flatMap((t) => t.partitions).reduce((s, p) => s + Math.max(0, Number(p.offset)), 0);
        if (atBroker !== 100) await new Promise((resolve) => setTimeout(resolve, 200));
      }
      expect(atBroker).toBe(100);
    } finally {
      await admin.disconnect();
    }
    expect(proxy.logs()).not.toMatch(/"level":"(warn|error)"/);
  });

  test('the Java client produces and consumes in a group through the plaintext listener', async () => {
    await produceAndConsume(java, { bootstrap: proxy.bootstrap }, { count: 300 });
  }, 120_000);
});

describe('proxy → SASL_SSL broker', () => {
  test('kafkajs with SCRAM through the plaintext listener; the cluster client authenticates over TLS', async () => {
    expect(saslCluster.securityProtocol).toBe('SASL_SSL');
    const { username, password } = saslCluster.sasl!.users[0]!;
    const proxy = await startTlsOffsetProxy(
      { ca: certs.ca, rejectUnauthorized: true },
      [
        ...['--cluster-sasl-mechanism', 'SCRAM-SHA-256', '--cluster-sasl-username', username],
        ...['--cluster-sasl-password', password, '--unknown-topics', 'reject'],
      ],
      saslCluster,
    );
    try {
      const [broker] = saslCluster.brokers;
      expect(proxy.proxy.brokers.upstreamOf(broker!.nodeId)).toEqual({
        host: '127.0.0.1',
        port: broker!.port,
      });
      // The client's own SASL exchange travels inside the proxy's TLS connection to the broker.
      const r = await kafkajsRoundTrip(
        { brokers: [proxy.bootstrap], sasl: { mechanism: 'scram-sha-256', username, password } },
        { bootstrap: proxy.bootstrap, sasl: { mechanism: 'SCRAM-SHA-256', username, password } },
        50,
      );
      expect(r.values).toHaveLength(50);
      expect(r.committed).toBe(50);
      expect(r.brokers.map((b) => b.port)).toEqual([proxy.port + 1 + broker!.nodeId]);
      expect(proxy.logs()).not.toMatch(/"level":"(warn|error)"/);
    } finally {
      await proxy.stop();
    }
  });
});

describe('proxy → SSL broker refusals', () => {
  const refusals: { name: string; tls: () => UpstreamTls; log: RegExp }[] = [
    {
      name: 'no client certificate',
      tls: () => ({ ca: certs.ca, rejectUnauthorized: true }),
      // Java 17's alert; TLS 1.3 also has certificate_required for it.
      log: /alert (bad certificate|certificate required)/i,
    },
    {
      name: 'a client certificate from a CA the broker does not trust',
      tls: () => ({
        ca: certs.ca,
        cert: certs.otherClientCert,
        key: certs.otherClientKey,
        rejectUnauthorized: true,
      }),
      log: /alert (certificate unknown|bad certificate|unknown ca)/i,
    },
    {
      name: 'a broker certificate the proxy does not trust',
      tls: () => ({
        ca: certs.otherCa,
        cert: certs.clientCert,
        key: certs.clientKey,
        rejectUnauthorized: true,
      }),
      log: /self[- ]signed certificate|unable to (verify|get local issuer)/i,
    },
  ];
  for (const { name, tls, log } of refusals) {
    test(`${name}: clients are closed without an answer, and the proxy logs why`, async () => {
      const proxy = await startTlsOffsetProxy(tls());
      try {
        // The cluster client could not discover the broker at start.
        expect(proxy.logs()).toMatch(/"event":"cluster not reachable at start"/);
        expect(proxy.proxy.brokers.upstreamOf(cluster.brokers[0]!.nodeId)).toBeUndefined();
        await expectClosedWithoutAnswer(proxy.bootstrap);
        // kafkajs gives up with a connection error, not a timeout.
        const kafka = new Kafka({
          brokers: [proxy.bootstrap],
          logLevel: logLevel.NOTHING,
          retry: { retries: 0 },
          connectionTimeout: 3_000,
          requestTimeout: 10_000,
        });
        const admin = kafka.admin({ retry: { retries: 0 } });
        const started = Date.now();
        await expect(admin.connect()).rejects.toThrow(/Connection|closed/i);
        expect(Date.now() - started).toBeLessThan(5_000);
        await admin.disconnect();
        const warnings = proxy
          .logs()
          .split('\n')
          .filter((l) => /"level":"(warn|error)"/.test(l));
        expect(warnings.join('\n')).toMatch(log);
      } finally {
        await proxy.stop();
      }
    });
  }

  test('a broker port without TLS: clients are closed, not left hanging', async () => {
    // The shared plaintext broker reads the TLS hello as an oversized frame and hangs up.
    const lines: string[] = [];
    const log = createLogger('debug', {}, (line) => lines.push(line));
    const proxy = await startProxy(inject('kafkaBootstrap'), {
      brokerTls: trusted(),
      requestTimeoutMs: 5_000,
      log,
    });
    try {
      await expectClosedWithoutAnswer(proxy.bootstrap);
      expect(lines.join('\n')).toMatch(
        /"event":"no broker connection for client"[^\n]*secure TLS connection/,
      );
    } finally {
      await proxy.stop();
    }
  });

  test('--broker-tls-insecure accepts the untrusted broker certificate (so the refusal above was verification)', async () => {
    const proxy = await startTlsOffsetProxy({ ...trusted(), ca: certs.otherCa, rejectUnauthorized: false });
    try {
      const raw = await RawClient.connect(proxy.bootstrap);
      const body = await raw.request<MetadataResponse>(ApiKey.Metadata, 12, 1, metadataRequestBody());
      raw.close();
      expectProxyPorts(body.brokers, proxy.port);
    } finally {
      await proxy.stop();
    }
  });
});

describe('the CLI in front of the SSL broker', () => {
  // kafkajsRoundTrip creates its topic with a plaintext admin: a bare proxy (no offset service;
  // it discovers brokers with its own one-off TLS Metadata request) gives it one.
  let plain: RunningProxy;
  beforeAll(async () => {
    plain = await startProxy(cluster.bootstrap, { brokerTls: trusted() });
    expect(plain.proxy.brokers.upstreamOf(cluster.brokers[0]!.nodeId)).toEqual({
      host: '127.0.0.1',
      port: cluster.brokers[0]!.port,
    });
  });
  afterAll(async () => {
    await plain?.stop();
  });

  /** The port of `--http 127.0.0.1:0`, from the proxy's log. */
  async function httpPort(out: () => string): Promise<number> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const m = /"event":"http listening"[^\n]*"port":(\d+)/.exec(out());
      if (m) return Number(m[1]);
      if (Date.now() > deadline) throw new Error(`no http listener:\n${out()}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  test('TLS listener for clients, TLS with a client certificate to the broker from KOP_BROKER_TLS_*: kafkajs ssl works, /readyz is ready', async () => {
    const cli = await spawnProxy(
      [
        '--bootstrap-server',
        cluster.bootstrap,
        '--client-tls-cert',
        certs.files.serverCert,
        '--client-tls-key',
        certs.files.serverKey,
        '--http',
        '127.0.0.1:0',
        '--mirror-commits',
      ],
      {
        KOP_BROKER_TLS: 'true',
        KOP_BROKER_TLS_CA: certs.files.ca,
        KOP_BROKER_TLS_CERT: certs.files.clientCert,
        KOP_BROKER_TLS_KEY: certs.files.clientKey,
      },
    );
    try {
      const port = await httpPort(cli.output);
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
      expect(ready.status, await ready.clone().text()).toBe(200);
      const config: Omit<KafkaConfig, 'logLevel'> = { brokers: [cli.bootstrap], ssl: { ca: [certs.ca] } };
      const r = await kafkajsRoundTrip(config, { bootstrap: plain.bootstrap }, 50);
      expect(r.values).toHaveLength(50);
      expect(r.committed).toBe(50);
      expectProxyPorts(r.brokers, cli.port);
      expect(cli.output()).not.toMatch(/"level":"(warn|error)"/);
    } finally {
      expect(await cli.stop()).toBe(0);
    }
  });

  test('without a client certificate: /readyz says why the broker is not ready, clients are closed', async () => {
    const cli = await spawnProxy([
      '--bootstrap-server',
      cluster.bootstrap,
      '--broker-tls',
      'true',
      '--broker-tls-ca',
      certs.files.ca,
      '--http',
      '127.0.0.1:0',
      '--request-timeout-ms',
      '5000',
    ]);
    try {
      const port = await httpPort(cli.output);
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
      expect(ready.status).toBe(503);
      const body = (await ready.json()) as { checks: { broker: { ok: boolean; error?: string } } };
      expect(body.checks.broker.ok).toBe(false);
      expect(body.checks.broker.error).toMatch(/alert (bad certificate|certificate required)/i);
      await expectClosedWithoutAnswer(cli.bootstrap);
      expect(cli.output()).toMatch(/"level":"warn"[^\n]*alert (bad certificate|certificate required)/i);
    } finally {
      expect(await cli.stop()).toBe(0);
    }
  });
});

describe('broker TLS options are refused when they would be ignored', () => {
  const load =
    (...flags: string[]) =>
    () =>
      loadConfig(['--bootstrap-server', '127.0.0.1:9092', ...flags], {});

  test('a CA, certificate, key or insecure without --broker-tls true (it would dial the brokers in plaintext)', () => {
    expect(load('--broker-tls-ca', '/etc/kop/ca.pem')).toThrow(ConfigError);
    expect(load('--broker-tls-ca', '/etc/kop/ca.pem')).toThrow(
      'invalid configuration: broker-tls-ca="/etc/kop/ca.pem": needs broker-tls true',
    );
    expect(load('--broker-tls-cert', '/etc/kop/c.pem', '--broker-tls-key', '/etc/kop/k.pem')).toThrow(
      /broker-tls-cert="\/etc\/kop\/c.pem": needs broker-tls true/,
    );
    expect(load('--broker-tls-insecure', 'true')).toThrow(
      /broker-tls-insecure="true": needs broker-tls true/,
    );
    expect(load('--broker-tls-insecure', 'false')).not.toThrow();
  });

  test('a certificate without its key, or a key without its certificate (no certificate would be presented)', () => {
    expect(load('--broker-tls', 'true', '--broker-tls-cert', '/etc/kop/c.pem')).toThrow(
      /broker-tls-key=null: broker mutual TLS needs both a certificate and a key/,
    );
    expect(load('--broker-tls', 'true', '--broker-tls-key', '/etc/kop/k.pem')).toThrow(
      /broker-tls-cert=null/,
    );
    expect(
      load('--broker-tls', 'true', '--broker-tls-cert', '/c.pem', '--broker-tls-key', '/k.pem')().brokerTls,
    ).toEqual({
      ca: undefined,
      cert: '/c.pem',
      key: '/k.pem',
      insecure: false,
    });
  });
});
