/**
 * The docker-compose picture without Docker, on the test bed's real components: Kafka (KRaft) and
 * Redis from test/bed, the proxy as the real CLI with --http, Prometheus (if /usr/bin/prometheus
 * exists) scraping it, a producer writing a record every 100 ms and a consumer group that lags
 * behind it on purpose. Prints where to look, then runs until Ctrl-C (or --seconds N).
 *
 *   npm run build && npx tsx scripts/demo.ts [--seconds 60]
 *
 * Every process started here dies with this one (the bed starts them with pdeathsig).
 */

import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Kafka, logLevel, Partitioners } from 'kafkajs';
import { startKafka } from '../test/bed/kafka.js';
import { freePort } from '../test/bed/ports.js';
import { makeRunDir, spawnManaged, waitUntil } from '../test/bed/process.js';
import { startRedis } from '../test/bed/redis.js';
import { freePortRange } from '../test/harness/proxy.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const TOKEN = randomBytes(18).toString('hex');
const TOPIC = 'demo-orders';
const GROUP = 'demo-billing';

const secondsArg = process.argv.indexOf('--seconds');
const runSeconds = secondsArg > 0 ? Number(process.argv[secondsArg + 1]) : Infinity;

async function main(): Promise<void> {
  if (!fs.existsSync(path.join(repo, 'dist/proxy/cli.js'))) throw new Error('run `npm run build` first');
  console.log('starting Kafka and Redis (test bed)…');
  const [kafka, redis] = await Promise.all([startKafka(), startRedis()]);

  const listenPort = await freePortRange();
  const httpPort = await freePort();
  const proxyBootstrap = `127.0.0.1:${listenPort}`;
  const runDir = makeRunDir('demo');
  const proxyLog = path.join(runDir, 'proxy.log');
  const proxy = spawnManaged({
    name: 'kafka-offset-proxy',
    command: process.execPath,
    args: [path.join(repo, 'bin/kafka-offset-proxy.js')],
    env: {
      ...process.env,
      KOP_BOOTSTRAP_SERVER: kafka.bootstrap,
      KOP_LISTEN: proxyBootstrap,
      KOP_STORE: redis.url,
      KOP_HTTP: `127.0.0.1:${httpPort}`,
      KOP_HTTP_TOKEN: TOKEN,
      KOP_LAG_INTERVAL_MS: '2000',
    },
    logFile: proxyLog,
  });
  const httpUrl = `http://127.0.0.1:${httpPort}`;
  await waitUntil('proxy ready', async () => (await fetch(`${httpUrl}/readyz`)).ok, {
    timeoutMs: 30_000,
    proc: proxy,
  });

  let prometheusUrl: string | undefined;
  if (fs.existsSync('/usr/bin/prometheus')) {
    const promPort = await freePort();
    const config = path.join(runDir, 'prometheus.yml');
    // deploy/prometheus.yml with the local target.
    fs.writeFileSync(
      config,
      fs
        .readFileSync(path.join(repo, 'deploy/prometheus.yml'), 'utf8')
        .replace(/scrape_interval: \S+/, 'scrape_interval: 2s')
        .replace("['proxy:9464']", `['127.0.0.1:${httpPort}']`),
    );
    const prometheus = spawnManaged({
      name: 'prometheus',
      command: '/usr/bin/prometheus',
      args: [
        `--config.file=${config}`,
        `--storage.tsdb.path=${path.join(runDir, 'prometheus-data')}`,
        `--web.listen-address=127.0.0.1:${promPort}`,
        '--log.level=warn',
      ],
      logFile: path.join(runDir, 'prometheus.log'),
    });
    prometheusUrl = `http://127.0.0.1:${promPort}`;
    await waitUntil('Prometheus ready', async () => (await fetch(`${prometheusUrl}/-/ready`)).ok, {
      timeoutMs: 60_000,
      proc: prometheus,
    });
  }

  const client = new Kafka({ clientId: 'demo', brokers: [proxyBootstrap], logLevel: logLevel.NOTHING });
  const admin = client.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic: TOPIC, numPartitions: 3 }], waitForLeaders: true });
  await admin.disconnect();

  const producer = client.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  let produced = 0;
  const produceTimer = setInterval(() => {
    producer.send({ topic: TOPIC, messages: [{ key: `k${produced}`, value: `order ${produced}` }] }).then(
      () => produced++,
      () => {},
    );
  }, 100);

  // A consumer slower than the producer (150 ms per record), so its lag grows visibly.
  const consumer = client.consumer({ groupId: GROUP, maxWaitTimeInMs: 200 });
  await consumer.connect();
  await consumer.subscribe({ topics: [TOPIC], fromBeginning: true });
  let consumed = 0;
  await consumer.run({
    eachMessage: async () => {
      await new Promise((r) => setTimeout(r, 150));
      consumed++;
    },
  });

  const curlMetrics = `curl -s -H 'Authorization: Bearer ${TOKEN}' ${httpUrl}/metrics | grep -E '^(kafka_consumergroup|kop_commits)'`;
  console.log(`
kafka-offset-proxy demo is running
  Kafka (real brokers):   ${kafka.bootstrap}
  Redis (offset store):   ${redis.url}
  proxy (clients here):   ${proxyBootstrap}
  health / readiness:     ${httpUrl}/healthz   ${httpUrl}/readyz
  metrics:                ${curlMetrics}
  Prometheus:             ${prometheusUrl ?? '(not installed)'}${prometheusUrl ? `/graph?g0.expr=kafka_consumergroup_lag_sum` : ''}
  proxy log (JSON):       ${proxyLog}
  producer → topic ${TOPIC} (10 records/s); consumer group ${GROUP} (~6.6 records/s, so it lags)
  kcat through the proxy: kcat -b ${proxyBootstrap} -G other-group ${TOPIC}
Ctrl-C stops everything.
`);

  // Never rejects (its errors are printed), so the interval may drop its promise.
  const printStatus = async (): Promise<void> => {
    try {
      const text = await (
        await fetch(`${httpUrl}/metrics`, { headers: { Authorization: `Bearer ${TOKEN}` } })
      ).text();
      const lag =
        /^kafka_consumergroup_lag_sum\{consumergroup="demo-billing"\} (\S+)$/m.exec(text)?.[1] ?? '?';
      const commits = /^kop_commits_total\{result="accepted"\} (\S+)$/m.exec(text)?.[1] ?? '?';
      console.log(
        `produced ${produced}, consumed ${consumed}, lag (proxy metric) ${lag}, committed partitions ${commits}`,
      );
    } catch (err) {
      console.log(`metrics unavailable: ${(err as Error).message}`);
    }
  };
  const status = setInterval(() => void printStatus(), 5_000);

  let stopping = false;
  const stop = async (): Promise<void> => {
    if (stopping) return;
    stopping = true;
    clearInterval(status);
    clearInterval(produceTimer);
    console.log('stopping…');
    await Promise.allSettled([consumer.disconnect(), producer.disconnect()]);
    await proxy.stop();
    await Promise.allSettled([kafka.stop(), redis.stop()]);
    process.exit(0);
  };
  process.once('SIGINT', () => void stop());
  if (Number.isFinite(runSeconds)) setTimeout(() => void stop(), runSeconds * 1000);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
