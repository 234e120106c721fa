// Real Apache Kafka brokers (KRaft, combined controller+broker nodes) from Maven Central jars.

import { createHash, createPrivateKey, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { fileURLToPath } from 'node:url';
import { Kafka, logLevel } from 'kafkajs';
import type { SASLOptions } from 'kafkajs';
import { freePorts } from './ports.js';
import { makeRunDir, removeRunDir, runToCompletion, spawnManaged, tailFile, waitUntil } from './process.js';
import type { ManagedProcess } from './process.js';

export const KAFKA_VERSION = '4.4.0';
/** Newest 3.9 release on Maven Central (3.9.2 resolves), for compatibility runs. */
export const KAFKA_COMPAT_VERSION = '3.9.2';

export interface KafkaBroker {
  nodeId: number;
  host: string;
  port: number;
}

export interface KafkaCluster {
  version: string;
  /** "127.0.0.1:port[,...]": the client listeners, at the ports they really listen on. */
  bootstrap: string;
  brokers: KafkaBroker[];
  /** Present for the SASL shape: the admin (super user) first, then one non-admin user. */
  sasl?: { users: { username: string; password: string }[] };
  /** The client listener's security protocol. */
  securityProtocol: SecurityProtocol;
  /** Jars of broker + kafka-tools + kafka-clients for this version, ':'-separated. */
  classpath: string;
  stopBroker(nodeId: number): Promise<void>;
  startBroker(nodeId: number): Promise<void>;
  logTail(nodeId?: number, lines?: number): string;
  stop(): Promise<void>;
}

export type SecurityProtocol = 'PLAINTEXT' | 'SASL_PLAINTEXT' | 'SSL' | 'SASL_SSL';

export interface StartKafkaOptions {
  brokers?: 1 | 3;
  version?: string;
  /** SASL_PLAINTEXT on the client listener (SCRAM-SHA-256, SCRAM-SHA-512, PLAIN) with the StandardAuthorizer. */
  sasl?: boolean;
  /** Node id -> port to advertise for the client listener instead of the one it listens on (for a tap). */
  advertisedPorts?: Record<number, number>;
  /**
   * TLS on the client listener: SSL, or SASL_SSL with `sasl`. The INTERNAL (replication) and
   * CONTROLLER listeners stay as they are without it, so the bed's readiness checks and the brokers'
   * own traffic need no certificates.
   */
  tls?: KafkaTlsOptions;
  /** More server.properties lines (`key=value`), after the bed's own, so they win. */
  serverProperties?: string[];
  /**
   * More PLAINTEXT client listeners (single broker only), each on its own port and advertised at
   * another (a relay in front of it), so clients that bootstrap through the relay stay on it while
   * others use the CLIENT listener directly. `name` is the listener name (upper case).
   */
  extraListeners?: { name: string; port: number; advertisedPort: number }[];
}

export interface KafkaTlsOptions {
  /** PEM file: the broker certificate of every node (its chain may follow); it must name 127.0.0.1. */
  cert: string;
  /** PEM file: its private key, in any form Node reads (Kafka is given a PKCS#8 copy). */
  key: string;
  /** PEM file: the CAs whose client certificates the broker accepts (ssl.truststore). */
  ca?: string;
  /** ssl.client.auth of the client listener; default none. `required` needs `ca`. */
  clientAuth?: 'none' | 'requested' | 'required';
}

const HOST = '127.0.0.1';
const POM = fileURLToPath(new URL('./maven/pom.xml', import.meta.url));
const SASL_USERS = [
  { username: 'admin', password: 'admin-secret' },
  { username: 'alice', password: 'alice-secret' },
];

// ---- classpath ---------------------------------------------------------------------------------

export function bedCacheDir(): string {
  return (
    process.env['KOP_CACHE_DIR'] ??
    path.join(process.env['XDG_CACHE_HOME'] ?? path.join(os.homedir(), '.cache'), 'kafka-offset-proxy')
  );
}

const isKafka3 = (version: string) => version.startsWith('3.');
const classpathMemo = new Map<string, Promise<string>>();

/**
 * The broker's classpath for `version`, resolved by Maven once and cached in a file outside the
 * repository (keyed by the pom's hash, so editing the pom re-resolves). Later runs do not call Maven.
 */
export function kafkaClasspath(version: string = KAFKA_VERSION): Promise<string> {
  let memo = classpathMemo.get(version);
  if (!memo) {
    memo = resolveClasspath(version);
    classpathMemo.set(version, memo);
    memo.catch(() => classpathMemo.delete(version));
  }
  return memo;
}

async function resolveClasspath(version: string): Promise<string> {
  const pomHash = createHash('sha256').update(fs.readFileSync(POM)).digest('hex').slice(0, 12);
  const cacheDir = bedCacheDir();
  const cacheFile = path.join(cacheDir, `kafka-${version}-${pomHash}.classpath`);
  const cached = readClasspathFile(cacheFile);
  if (cached) return cached;

  fs.mkdirSync(cacheDir, { recursive: true });
  const tmp = `${cacheFile}.${process.pid}.tmp`;
  const logFile = path.join(cacheDir, `maven-${version}.log`);
  fs.writeFileSync(logFile, '');
  await runToCompletion({
    name: `mvn dependency:build-classpath (Kafka ${version})`,
    command: 'mvn',
    args: [
      '-q',
      '-B',
      '-f',
      POM,
      `-Dkafka.version=${version}`,
      ...(isKafka3(version) ? ['-Dkafka3'] : []),
      'dependency:build-classpath',
      `-Dmdep.outputFile=${tmp}`,
    ],
    logFile,
    timeoutMs: 15 * 60_000,
  });
  const resolved = readClasspathFile(tmp);
  if (!resolved) throw new Error(`Maven wrote no usable classpath for Kafka ${version}; see ${logFile}`);
  fs.renameSync(tmp, cacheFile); // atomic: a concurrent run sees either nothing or the whole file
  return resolved;
}

function readClasspathFile(file: string): string | undefined {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8').trim();
  } catch {
    return undefined;
  }
  const jars = text.split(':').filter((jar) => jar !== '');
  // A cleaned ~/.m2 invalidates the cache.
  if (jars.length === 0 || !jars.every((jar) => fs.existsSync(jar))) return undefined;
  return jars.join(':');
}

// ---- configuration -----------------------------------------------------------------------------

interface NodePorts {
  nodeId: number;
  client: number;
  internal: number;
  controller: number;
}

function jaasPlain(): string {
  // The broker's own identity (username/password) for the INTERNAL and CONTROLLER listeners, and the
  // PLAIN user database (user_NAME="password") for every listener.
  const users = SASL_USERS.map((u) => `user_${u.username}="${u.password}"`).join(' ');
  const admin = SASL_USERS[0]!;
  return `org.apache.kafka.common.security.plain.PlainLoginModule required username="${admin.username}" password="${admin.password}" ${users};`;
}

function clientProtocol(opts: StartKafkaOptions): SecurityProtocol {
  if (opts.tls) return opts.sasl ? 'SASL_SSL' : 'SSL';
  return opts.sasl ? 'SASL_PLAINTEXT' : 'PLAINTEXT';
}

/**
 * Writes the keystore Kafka reads for the client listener (ssl.keystore.type=PEM): the private key
 * as unencrypted PKCS#8, the only unencrypted form Kafka's PEM parser takes, then the certificate.
 */
function writePemKeystore(tlsOpts: KafkaTlsOptions, file: string): string {
  const key = createPrivateKey(fs.readFileSync(tlsOpts.key)).export({ format: 'pem', type: 'pkcs8' });
  fs.writeFileSync(file, `${key.toString().trimEnd()}\n${fs.readFileSync(tlsOpts.cert, 'utf8')}`, {
    mode: 0o600,
  });
  return file;
}

/** SSL settings of the client listener only (listener-prefixed), from the keystore written above. */
function clientTlsProperties(tlsOpts: KafkaTlsOptions, keystore: string): string[] {
  const clientAuth = tlsOpts.clientAuth ?? 'none';
  if (clientAuth !== 'none' && !tlsOpts.ca) throw new Error(`ssl.client.auth=${clientAuth} needs a CA`);
  const prefix = 'listener.name.client.ssl';
  return [
    `${prefix}.keystore.type=PEM`,
    `${prefix}.keystore.location=${keystore}`,
    ...(tlsOpts.ca ? [`${prefix}.truststore.type=PEM`, `${prefix}.truststore.location=${tlsOpts.ca}`] : []),
    `${prefix}.client.auth=${clientAuth}`,
  ];
}

function serverProperties(
  node: NodePorts,
  all: NodePorts[],
  dataDir: string,
  opts: StartKafkaOptions,
  keystore: string | null,
): string {
  const n = all.length;
  const protocol = opts.sasl ? 'SASL_PLAINTEXT' : 'PLAINTEXT';
  const advertisedClient = opts.advertisedPorts?.[node.nodeId] ?? node.client;
  const minIsr = n >= 3 ? 2 : 1;
  const extra = opts.extraListeners ?? [];
  const extraListeners = extra.map((l) => `,${l.name}://${HOST}:${l.port}`).join('');
  const extraAdvertised = extra.map((l) => `,${l.name}://${HOST}:${l.advertisedPort}`).join('');
  const extraProtocols = extra.map((l) => `,${l.name}:PLAINTEXT`).join('');
  const lines = [
    'process.roles=broker,controller',
    `node.id=${node.nodeId}`,
    `controller.quorum.voters=${all.map((p) => `${p.nodeId}@${HOST}:${p.controller}`).join(',')}`,
    // CLIENT is what clients (and the proxy) use and may be advertised at a tap's port; INTERNAL is
    // for replication and always advertised at its real port, so brokers never talk through a tap.
    `listeners=CLIENT://${HOST}:${node.client},INTERNAL://${HOST}:${node.internal},CONTROLLER://${HOST}:${node.controller}${extraListeners}`,
    `advertised.listeners=CLIENT://${HOST}:${advertisedClient},INTERNAL://${HOST}:${node.internal}${extraAdvertised}`,
    `listener.security.protocol.map=CLIENT:${clientProtocol(opts)},INTERNAL:${protocol},CONTROLLER:${protocol}${extraProtocols}`,
    'controller.listener.names=CONTROLLER',
    'inter.broker.listener.name=INTERNAL',
    `log.dirs=${dataDir}`,
    // Fast start and fast first group use.
    'group.initial.rebalance.delay.ms=0',
    // Lower bounds only (the defaults stay): tests of session and rebalance timeouts may choose
    // short ones instead of waiting out Kafka's default minimums (6 s classic, 45 s KIP-848 and
    // KIP-1071 streams groups; a 3.9 broker ignores the streams one).
    'group.min.session.timeout.ms=500',
    'group.consumer.min.session.timeout.ms=1000',
    'group.consumer.min.heartbeat.interval.ms=200',
    'group.streams.min.session.timeout.ms=5000',
    'offsets.topic.num.partitions=5',
    `offsets.topic.replication.factor=${n}`,
    'transaction.state.log.num.partitions=5',
    `transaction.state.log.replication.factor=${n}`,
    `transaction.state.log.min.isr=${minIsr}`,
    `share.coordinator.state.topic.replication.factor=${n}`,
    `share.coordinator.state.topic.min.isr=${minIsr}`,
    'num.partitions=1',
    `default.replication.factor=${n}`,
    `min.insync.replicas=${minIsr}`,
    'auto.create.topics.enable=true',
    // Small footprint on a shared 2-core machine.
    'num.network.threads=2',
    'num.io.threads=4',
    'num.recovery.threads.per.data.dir=1',
    'background.threads=4',
    'log.cleaner.threads=1',
    'log.cleaner.dedupe.buffer.size=16777216',
  ];
  if (opts.tls && keystore) lines.push(...clientTlsProperties(opts.tls, keystore));
  if (opts.sasl) {
    const scram = 'org.apache.kafka.common.security.scram.ScramLoginModule required;';
    lines.push(
      'sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512',
      // Broker-to-broker and broker-to-controller traffic authenticates as admin with PLAIN, so
      // super.users needs no principal other than admin.
      'sasl.mechanism.inter.broker.protocol=PLAIN',
      'sasl.mechanism.controller.protocol=PLAIN',
      'authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer',
      `super.users=User:${SASL_USERS[0]!.username}`,
    );
    for (const listener of ['client', 'internal', 'controller']) {
      lines.push(
        `listener.name.${listener}.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512`,
        `listener.name.${listener}.plain.sasl.jaas.config=${jaasPlain()}`,
        `listener.name.${listener}.scram-sha-256.sasl.jaas.config=${scram}`,
        `listener.name.${listener}.scram-sha-512.sasl.jaas.config=${scram}`,
      );
    }
  }
  if (opts.serverProperties) lines.push(...opts.serverProperties);
  return lines.join('\n') + '\n';
}

// The broker logs to stdout, which the bed appends to the node's log file.
const LOG4J2_XML = `<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="warn">
  <Appenders>
    <Console name="stdout" target="SYSTEM_OUT"><PatternLayout pattern="[%d] %p %m (%c)%n"/></Console>
  </Appenders>
  <Loggers>
    <Logger name="kafka.request.logger" level="warn"/>
    <Root level="info"><AppenderRef ref="stdout"/></Root>
  </Loggers>
</Configuration>
`;
const LOG4J1_PROPERTIES = `log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
`;

function jvmArgs(version: string, dir: string, heap: string): string[] {
  const logArg = isKafka3(version)
    ? `-Dlog4j.configuration=file:${path.join(dir, 'log4j.properties')}`
    : `-Dlog4j2.configurationFile=${path.join(dir, 'log4j2.xml')}`;
  return [
    `-Xmx${heap}`,
    '-Xms64m',
    '-Xss1m',
    // Fast start on 2 shared cores matters more than peak throughput.
    '-XX:+UseSerialGC',
    '-XX:TieredStopAtLevel=1',
    '-XX:CICompilerCount=1',
    '-XX:-UsePerfData',
    '-XX:+ExitOnOutOfMemoryError',
    '-Djava.awt.headless=true',
    logArg,
  ];
}

// ---- readiness ---------------------------------------------------------------------------------

function saslOptions(mechanism: 'plain' | 'scram-sha-256'): SASLOptions {
  const admin = SASL_USERS[0]!;
  return { mechanism, username: admin.username, password: admin.password } as SASLOptions;
}

/** Number of live brokers seen by node `port` (INTERNAL listener, whose addresses are always real). */
async function liveBrokerIds(port: number, sasl: boolean): Promise<number[]> {
  const kafka = new Kafka({
    clientId: 'kop-bed-readiness',
    brokers: [`${HOST}:${port}`],
    logLevel: logLevel.NOTHING,
    connectionTimeout: 1500,
    requestTimeout: 5000,
    retry: { retries: 0 },
    ...(sasl ? { sasl: saslOptions('plain') } : {}),
  });
  const admin = kafka.admin({ retry: { retries: 0 } });
  try {
    await admin.connect();
    const { brokers } = await admin.describeCluster();
    return brokers.map((b) => b.nodeId).sort();
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

/**
 * Makes the group coordinator ready before the first test needs it: the first FindCoordinator creates
 * __consumer_offsets, and its partitions then load for a moment (COORDINATOR_LOAD_IN_PROGRESS). Forty
 * group ids cover all 5 offsets partitions with near certainty; DescribeGroups succeeds for each
 * only once the partition owning it has loaded.
 */
async function groupCoordinatorReady(port: number, sasl: boolean): Promise<boolean> {
  const kafka = new Kafka({
    clientId: 'kop-bed-readiness',
    brokers: [`${HOST}:${port}`],
    logLevel: logLevel.NOTHING,
    connectionTimeout: 1500,
    requestTimeout: 5000,
    retry: { retries: 0 },
    ...(sasl ? { sasl: saslOptions('plain') } : {}),
  });
  const admin = kafka.admin({ retry: { retries: 0 } });
  try {
    await admin.connect();
    await admin.describeCluster(); // loads the metadata kafkajs needs to find coordinators
    const groupIds = Array.from({ length: 40 }, (_, i) => `kop-bed-warmup-${i}`);
    // kafkajs throws on a group-level error such as COORDINATOR_LOAD_IN_PROGRESS.
    const { groups } = await admin.describeGroups(groupIds);
    return groups.length === groupIds.length;
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

/**
 * The client port accepts; with TLS, it completes a handshake, which proves the listener serves
 * with its keystore loaded. Nothing is verified here (tests do that). With ssl.client.auth=required
 * this holds too: Java 17 and Node 20 speak TLS 1.3, where the broker's verdict on the (missing)
 * client certificate comes after the client's side of the handshake has completed.
 */
function clientPortAnswers(port: number, withTls: boolean): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = withTls
      ? tls.connect({ host: HOST, port, rejectUnauthorized: false })
      : net.connect({ host: HOST, port });
    socket.setTimeout(1000);
    socket.once(withTls ? 'secureConnect' : 'connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
    socket.on('error', () => {
      socket.destroy();
      resolve(false);
    });
  });
}

// ---- start -------------------------------------------------------------------------------------

export async function startKafka(opts: StartKafkaOptions = {}): Promise<KafkaCluster> {
  const version = opts.version ?? KAFKA_VERSION;
  const count = opts.brokers ?? 1;
  const sasl = opts.sasl ?? false;
  if (opts.extraListeners?.length && count !== 1) throw new Error('extraListeners needs a single broker');
  const classpath = await kafkaClasspath(version);
  const dir = makeRunDir(`kafka-${version}-${count}${sasl ? '-sasl' : ''}${opts.tls ? '-tls' : ''}`);
  const ports = await freePorts(count * 3);
  const nodes: NodePorts[] = [];
  for (let i = 0; i < count; i++) {
    nodes.push({
      nodeId: i + 1,
      client: ports[i * 3]!,
      internal: ports[i * 3 + 1]!,
      controller: ports[i * 3 + 2]!,
    });
  }
  fs.writeFileSync(path.join(dir, 'log4j2.xml'), LOG4J2_XML);
  fs.writeFileSync(path.join(dir, 'log4j.properties'), LOG4J1_PROPERTIES);
  const keystore = opts.tls ? writePemKeystore(opts.tls, path.join(dir, 'client-keystore.pem')) : null;

  // A single broker gets Kafka's own default heap (kafka-server-start.sh: 1 GB): it receives what
  // the proxy passes on as it arrives, and a large request's buffer is allocated whole from its
  // size prefix (queued.max.request.bytes is unbounded by default), so the fuzz run's requests that
  // announce 64-100 MB each, up to the proxy's request pool of 256 MiB at once, ran 512 MB out.
  const heap = count === 1 ? '1g' : '384m';
  const nodeDir = (id: number) => path.join(dir, `node-${id}`);
  const propsFile = (id: number) => path.join(nodeDir(id), 'server.properties');
  const logFile = (id: number) => path.join(dir, `broker-${id}.log`);

  // Format every node's storage with one cluster id (static quorum, so no --standalone).
  // Like Kafka's own Uuid.randomUuid(): no leading '-', which the storage tool's argument parser
  // would take for an option ("--cluster-id: expected one argument", 1 start in 64).
  let clusterId = randomBytes(16).toString('base64url');
  while (clusterId.startsWith('-')) clusterId = randomBytes(16).toString('base64url');
  const scramArgs = sasl
    ? SASL_USERS.flatMap((u) =>
        ['SCRAM-SHA-256', 'SCRAM-SHA-512'].flatMap((m) => [
          '--add-scram',
          `${m}=[name=${u.username},password=${u.password}]`,
        ]),
      )
    : [];
  await Promise.all(
    nodes.map(async (node) => {
      fs.mkdirSync(nodeDir(node.nodeId), { recursive: true });
      fs.writeFileSync(
        propsFile(node.nodeId),
        serverProperties(node, nodes, path.join(nodeDir(node.nodeId), 'data'), opts, keystore),
      );
      await runToCompletion({
        name: `Kafka ${version} storage format (node ${node.nodeId})`,
        command: 'java',
        args: [
          ...jvmArgs(version, dir, '256m'),
          '-cp',
          classpath,
          'kafka.tools.StorageTool',
          'format',
          '-t',
          clusterId,
          '-c',
          propsFile(node.nodeId),
          ...scramArgs,
        ],
        logFile: path.join(dir, `format-${node.nodeId}.log`),
        timeoutMs: 120_000,
      });
    }),
  );

  const procs = new Map<number, ManagedProcess>();
  const launch = (nodeId: number): ManagedProcess => {
    const proc = spawnManaged({
      name: `Kafka ${version} broker ${nodeId}`,
      command: 'java',
      args: [...jvmArgs(version, dir, heap), '-cp', classpath, 'kafka.Kafka', propsFile(nodeId)],
      logFile: logFile(nodeId),
      cwd: nodeDir(nodeId),
    });
    procs.set(nodeId, proc);
    return proc;
  };
  const running = () => [...procs.entries()].filter(([, p]) => !p.exitStatus).map(([id]) => id);

  /** Waits until node `nodeId` answers Metadata with every running node, and its client port accepts. */
  const waitReady = async (nodeId: number, timeoutMs: number): Promise<void> => {
    const node = nodes.find((n) => n.nodeId === nodeId)!;
    const proc = procs.get(nodeId)!;
    await waitUntil(
      `Kafka ${version} broker ${nodeId} to list ${running().length} live broker(s)`,
      async () => {
        const ids = await liveBrokerIds(node.internal, sasl);
        const expected = running();
        return expected.every((id) => ids.includes(id)) && (await clientPortAnswers(node.client, !!opts.tls));
      },
      { timeoutMs, intervalMs: 250, proc },
    );
  };

  let stopped = false;
  const stopAll = async () => {
    if (stopped) return;
    stopped = true;
    // SIGKILL: a clean shutdown of a throwaway broker only costs time.
    await Promise.all([...procs.values()].map((p) => p.kill()));
    removeRunDir(dir);
  };

  try {
    for (const node of nodes) launch(node.nodeId);
    await Promise.all(nodes.map((node) => waitReady(node.nodeId, 120_000)));
    await waitUntil(
      `the group coordinator of Kafka ${version} to load`,
      () => groupCoordinatorReady(nodes[0]!.internal, sasl),
      {
        timeoutMs: 60_000,
        intervalMs: 200,
      },
    );
  } catch (error) {
    await stopAll();
    throw error;
  }

  const cluster: KafkaCluster = {
    version,
    bootstrap: nodes.map((n) => `${HOST}:${n.client}`).join(','),
    brokers: nodes.map((n) => ({ nodeId: n.nodeId, host: HOST, port: n.client })),
    ...(sasl ? { sasl: { users: SASL_USERS.map((u) => ({ ...u })) } } : {}),
    securityProtocol: clientProtocol(opts),
    classpath,
    async stopBroker(nodeId) {
      const proc = procs.get(nodeId);
      if (!proc) throw new Error(`no broker with node id ${nodeId}`);
      // SIGTERM: a controlled shutdown moves leadership away first, as in a rolling restart.
      await proc.stop({ timeoutMs: 30_000 });
    },
    async startBroker(nodeId) {
      const proc = procs.get(nodeId);
      if (!proc) throw new Error(`no broker with node id ${nodeId}`);
      if (!proc.exitStatus) return;
      launch(nodeId);
      await waitReady(nodeId, 120_000);
    },
    logTail(nodeId = nodes[0]!.nodeId, lines = 60) {
      return tailFile(logFile(nodeId), lines);
    },
    stop: stopAll,
  };
  return cluster;
}
