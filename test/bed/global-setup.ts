// vitest globalSetup of the `integration` project: one single-node Kafka (KAFKA_VERSION), one Redis
// and one ZooKeeper, started in parallel and shared by every integration test file via inject().
// Other shapes (3-node cluster, 3.9, SASL, Redis Cluster) are started by the files that need them.
//
// KOP_BOOTSTRAP=host:port[,...] uses that existing cluster instead of starting a broker
// (KOP_KAFKA_VERSION then names its version; default KAFKA_VERSION).

import type { TestProject } from 'vitest/node';
import { KAFKA_VERSION, kafkaClasspath, startKafka } from './kafka.js';
import { freePortWithCompanion } from './ports.js';
import type { KafkaCluster } from './kafka.js';
import { startRedis } from './redis.js';
import type { RedisServer } from './redis.js';
import { startZooKeeper } from './zookeeper.js';
import type { ZooKeeperServer } from './zookeeper.js';

declare module 'vitest' {
  export interface ProvidedContext {
    kafkaBootstrap: string;
    kafkaVersion: string;
    /** Jars of broker + kafka-tools + kafka-clients of kafkaVersion, ':'-separated. */
    kafkaClasspath: string;
    redisUrl: string;
    zkConnect: string;
    /**
     * A second PLAINTEXT listener of the shared broker that listens on `port` and is advertised at
     * `advertisedPort`, where nothing listens until a test puts a tap there (a relay to `port`):
     * clients that bootstrap through the tap stay on it. Null with KOP_BOOTSTRAP.
     */
    kafkaTappedListener: { port: number; advertisedPort: number } | null;
  }
}

async function timed<T>(what: string, start: () => Promise<T>): Promise<T> {
  const t0 = Date.now();
  const value = await start();
  console.log(`[bed] ${what} ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  return value;
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const t0 = Date.now();
  const externalBootstrap = process.env['KOP_BOOTSTRAP'];
  const version = externalBootstrap ? (process.env['KOP_KAFKA_VERSION'] ?? KAFKA_VERSION) : KAFKA_VERSION;
  // Both below the ephemeral ports, so no outgoing connection takes the tap's port meanwhile.
  const tapped = externalBootstrap
    ? null
    : await freePortWithCompanion(1).then((port) => ({ port, advertisedPort: port + 1 }));

  const results = await Promise.allSettled([
    externalBootstrap
      ? kafkaClasspath(version).then((classpath) => ({
          bootstrap: externalBootstrap,
          classpath,
          cluster: undefined,
        }))
      : timed(`Kafka ${version}`, () =>
          startKafka({ version, extraListeners: tapped ? [{ name: 'TAPPED', ...tapped }] : [] }),
        ).then((cluster: KafkaCluster) => ({
          bootstrap: cluster.bootstrap,
          classpath: cluster.classpath,
          cluster,
        })),
    timed('Redis', () => startRedis()),
    timed('ZooKeeper', () => startZooKeeper()),
  ]);
  const [kafka, redis, zk] = results;
  const stopAll = async () => {
    await Promise.allSettled([
      kafka.status === 'fulfilled' ? kafka.value.cluster?.stop() : undefined,
      redis.status === 'fulfilled' ? (redis.value as RedisServer).kill() : undefined,
      zk.status === 'fulfilled' ? (zk.value as ZooKeeperServer).stop() : undefined,
    ]);
  };
  const failures = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (
    failures.length > 0 ||
    kafka.status !== 'fulfilled' ||
    redis.status !== 'fulfilled' ||
    zk.status !== 'fulfilled'
  ) {
    await stopAll();
    throw new Error(
      `test bed failed to start:\n${failures.map((f) => String(f.reason?.stack ?? f.reason)).join('\n\n')}`,
    );
  }
  console.log(`[bed] all components ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);

  project.provide('kafkaBootstrap', kafka.value.bootstrap);
  project.provide('kafkaVersion', version);
  project.provide('kafkaClasspath', kafka.value.classpath);
  project.provide('redisUrl', redis.value.url);
  project.provide('zkConnect', zk.value.connectString);
  project.provide('kafkaTappedListener', tapped);

  return stopAll;
}
