/**
 * The guard's differential run at length (the integration test guard-differential.test.ts runs a
 * few scripts): generated scripts of group requests, each sent to the broker itself and through
 * the proxy on every store, until `--runs` scripts per protocol agree or one differs.
 *
 *   npm run diff:guard -- [--runs 100] [--protocol classic|consumer|both] [--seed N]
 *     [--max-changes 5] [--kafka-version 4.4.0] [--named]
 *
 * `--named` runs the named scripts of guard-regressions.ts first (of the protocols asked for);
 * `--runs 0` then runs no generated ones.
 *
 * Starts the bed's single broker (KOP_BOOTSTRAP=host:port uses that cluster instead), a Redis and
 * a ZooKeeper. On a difference fast-check shrinks the script and prints the shortest one found,
 * with every target's answers, the seed and the path to replay it; exit code 1. KIP-848 scripts
 * need Kafka 4.0 or later.
 */
import { pathToFileURL } from 'node:url';
import fc from 'fast-check';
import { createTopics } from '../bed/clients/kafkajs.js';
import { startKafka, KAFKA_VERSION } from '../bed/kafka.js';
import type { KafkaCluster } from '../bed/kafka.js';
import { startRedis } from '../bed/redis.js';
import type { RedisServer } from '../bed/redis.js';
import { startZooKeeper } from '../bed/zookeeper.js';
import type { ZooKeeperServer } from '../bed/zookeeper.js';
import { DEFAULT_TIMING, expectSameAnswers, scriptArb } from '../harness/guard-differential.js';
import type { Env, Protocol, Target } from '../harness/guard-differential.js';
import { GUARD_REGRESSIONS } from '../harness/guard-regressions.js';
import { startGuardTargets } from '../harness/guard-targets.js';
import type { GuardTargets } from '../harness/guard-targets.js';

interface Options {
  runs: number;
  protocols: Protocol[];
  seed?: number;
  maxChanges: number;
  kafkaVersion: string;
  named: boolean;
}

function parseArgs(argv: string[]): Options {
  const opts: Options = {
    runs: 100,
    protocols: ['classic', 'consumer'],
    maxChanges: 5,
    kafkaVersion: KAFKA_VERSION,
    named: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const value = argv[i + 1];
    const need = (): string => {
      if (value === undefined) throw new Error(`${argv[i]} needs a value`);
      i += 1;
      return value;
    };
    const int = (): number => {
      const v = need();
      const n = Number(v);
      if (!Number.isInteger(n)) throw new Error(`${argv[i - 1]}: not an integer: ${v}`);
      return n;
    };
    switch (argv[i]) {
      case '--runs':
        opts.runs = int();
        break;
      case '--seed':
        opts.seed = int();
        break;
      case '--max-changes':
        opts.maxChanges = int();
        break;
      case '--kafka-version':
        opts.kafkaVersion = need();
        break;
      case '--named':
        opts.named = true;
        break;
      case '--protocol': {
        const p = need();
        if (p !== 'classic' && p !== 'consumer' && p !== 'both') throw new Error(`--protocol: ${p}?`);
        opts.protocols = p === 'both' ? ['classic', 'consumer'] : [p];
        break;
      }
      default:
        throw new Error(`unknown argument ${argv[i]}`);
    }
  }
  return opts;
}

/** The named scripts; false when one differs (its report is printed). */
async function runNamed(targets: Target[], env: Env, protocols: Protocol[]): Promise<boolean> {
  let ok = true;
  for (const { title, script } of GUARD_REGRESSIONS) {
    if (!protocols.includes(script.protocol)) continue;
    const t0 = Date.now();
    try {
      await expectSameAnswers(targets, script, env, 'named');
      console.log(`agree (${((Date.now() - t0) / 1000).toFixed(1)} s): ${title}`);
    } catch (err) {
      ok = false;
      console.log(`DIFFER: ${title}\n${err instanceof Error ? err.message : String(err)}`);
    }
  }
  return ok;
}

export async function main(argv: string[]): Promise<number> {
  const opts = parseArgs(argv);
  let kafka: KafkaCluster | undefined;
  let redis: RedisServer | undefined;
  let zk: ZooKeeperServer | undefined;
  let bed: GuardTargets | undefined;
  try {
    const external = process.env['KOP_BOOTSTRAP'];
    [kafka, redis, zk] = await Promise.all([
      external ? undefined : startKafka({ version: opts.kafkaVersion }),
      startRedis(),
      startZooKeeper(),
    ]);
    const broker = external ?? kafka!.bootstrap;
    const topic = `guard-diff-run-${Date.now().toString(36)}`;
    const otherTopic = `${topic}-other`;
    await createTopics({ bootstrap: broker }, [
      { topic, partitions: 2, replicationFactor: 1 },
      { topic: otherTopic, partitions: 2, replicationFactor: 1 },
    ]);
    bed = await startGuardTargets(broker, redis.url, zk.connectString);
    const env: Env = { broker, topic, otherTopic, timing: DEFAULT_TIMING };
    let failed = false;
    if (opts.named) failed = !(await runNamed(bed.targets, env, opts.protocols));
    for (const protocol of opts.protocols) {
      if (opts.runs === 0) break;
      const t0 = Date.now();
      let n = 0;
      const targets = bed.targets;
      const result = await fc.check(
        fc.asyncProperty(scriptArb(protocol, opts.maxChanges), async (script) => {
          await expectSameAnswers(targets, script, env, 'run');
          n += 1;
          if (n % 10 === 0)
            console.log(`${protocol}: ${n} scripts agree (${Math.round((Date.now() - t0) / 1000)} s)`);
        }),
        { numRuns: opts.runs, ...(opts.seed === undefined ? {} : { seed: opts.seed }) },
      );
      if (result.failed) {
        failed = true;
        console.log(fc.defaultReportMessage(result));
        // The shortest script's answers on every target (the error of its last failing run).
        if (result.errorInstance instanceof Error) console.log(result.errorInstance.message);
      } else {
        console.log(
          `${protocol}: ${opts.runs} scripts, every answer as the broker's (${Math.round((Date.now() - t0) / 1000)} s, seed ${result.seed})`,
        );
      }
    }
    return failed ? 1 : 0;
  } finally {
    await bed?.stop();
    await Promise.allSettled([kafka?.stop(), redis?.kill(), zk?.stop()]);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      console.error(err);
      process.exit(2);
    },
  );
}
