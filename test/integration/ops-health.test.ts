// What the operator is told is true, through the real CLI against the real broker and Redis:
// listeners that cannot be bound (exit 2 naming the port and its option, or --bind-failure unready
// with /readyz 503 until the port is free), the store's health (log lines naming the target when
// it stops and starts answering, kop_store_up, refused commits logged with the reason), and that
// no password of any store URL form reaches logs, metrics, readiness answers or error messages.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { ErrorCode } from '../../protocol/error-codes.js';
import { startRedis, startRedisSentinel } from '../bed/redis.js';
import { redisCommand } from '../bed/resp.js';
import type { RedisServer } from '../bed/redis.js';
import { createTopics } from '../bed/clients/kafkajs.js';
import { produceAndConsume, uniqueName } from '../bed/clients/scenarios.js';
import { kafkajsClient } from '../bed/clients/kafkajs.js';
import { freePort } from '../bed/ports.js';
import { commitOnce, startCli } from '../harness/cli-process.js';
import type { CliProcess } from '../harness/cli-process.js';
import { ensureBuilt, freePortRange } from '../harness/proxy.js';

const kafka = inject('kafkaBootstrap');

/** Holds a TCP port so the proxy cannot bind it. */
function occupy(port: number): Promise<net.Server> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen({ host: '127.0.0.1', port }, () => resolve(s));
  });
}
const release = (s: net.Server) => new Promise<void>((r) => s.close(() => r()));

/** The node id of the bed's (single) broker: its port is listen port + 1 + node id. */
let nodeId: number;

async function readyz(
  httpPort: number,
): Promise<{ status: number; body: { checks: Record<string, { ok: boolean; error?: string }> } }> {
  const res = await fetch(`http://127.0.0.1:${httpPort}/readyz`);
  return { status: res.status, body: (await res.json()) as never };
}

async function metric(httpPort: number, name: string): Promise<string | undefined> {
  const text = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
  return text.split('\n').find((l) => l.startsWith(name));
}

async function eventually(what: string, check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

beforeAll(async () => {
  await ensureBuilt();
  const { describeCluster } = await import('../bed/clients/kafkajs.js');
  nodeId = (await describeCluster({ bootstrap: kafka })).brokers[0]!.nodeId;
}, 120_000);

describe('listeners that cannot be bound', () => {
  test('a broker port in use (listen port + 1 + node id): exit 2 naming the port and --listen', async () => {
    const base = await freePortRange();
    const blocker = await occupy(base + 1 + nodeId);
    try {
      const cli = startCli([
        '--bootstrap-server',
        kafka,
        '--listen',
        `127.0.0.1:${base}`,
        '--store',
        'memory://',
      ]);
      expect(await cli.exited).toBe(2);
      const last = cli.output().trimEnd().split('\n').at(-1)!;
      expect(last).toBe(
        `kafka-offset-proxy: invalid configuration: listen="127.0.0.1:${base}": broker ${nodeId}'s port ` +
          `127.0.0.1:${base + 1 + nodeId} (the --listen port + 1 + node id) cannot be bound: address already in use ` +
          `(EADDRINUSE); free the port, map broker ${nodeId} to another port with --broker-port ${nodeId}=<port>, ` +
          'or start anyway with --bind-failure unready',
      );
      expect(cli.output()).not.toContain('cluster not reachable');
    } finally {
      await release(blocker);
    }
  });

  test('a --broker-port in use, the bootstrap port in use, the --http port in use: exit 2 naming each', async () => {
    const base = await freePortRange();
    const taken = await freePort();
    const blocker = await occupy(taken);
    try {
      const mapped = startCli([
        ...['--bootstrap-server', kafka, '--listen', `127.0.0.1:${base}`, '--store', 'memory://'],
        ...['--broker-port', `${nodeId}=${taken}`],
      ]);
      const bootstrap = startCli([
        '--bootstrap-server',
        kafka,
        '--listen',
        `127.0.0.1:${taken}`,
        '--store',
        'memory://',
      ]);
      const http = startCli([
        ...['--bootstrap-server', kafka, '--listen', `127.0.0.1:${base + 4}`, '--store', 'memory://'],
        ...['--http', `127.0.0.1:${taken}`],
      ]);
      expect([await mapped.exited, await bootstrap.exited, await http.exited]).toEqual([2, 2, 2]);
      const last = (c: CliProcess) => c.output().trimEnd().split('\n').at(-1)!;
      expect(last(mapped)).toMatch(
        new RegExp(
          `^kafka-offset-proxy: invalid configuration: broker-port="${nodeId}=${taken}": broker ${nodeId}'s port 127.0.0.1:${taken} cannot be bound: address already in use`,
        ),
      );
      expect(last(bootstrap)).toBe(
        `kafka-offset-proxy: invalid configuration: listen="127.0.0.1:${taken}": the bootstrap port 127.0.0.1:${taken} cannot be bound: address already in use (EADDRINUSE)`,
      );
      expect(last(http)).toBe(
        `kafka-offset-proxy: invalid configuration: http="127.0.0.1:${taken}": cannot be bound: address already in use (EADDRINUSE)`,
      );
    } finally {
      await release(blocker);
    }
  });

  test('--bind-failure unready: /readyz 503 naming the port until it is free, then 200 and clients work', async () => {
    const base = await freePortRange();
    const httpPort = await freePort();
    const brokerPort = base + 1 + nodeId;
    const blocker = await occupy(brokerPort);
    const cli = startCli([
      ...['--bootstrap-server', kafka, '--listen', `127.0.0.1:${base}`, '--store', 'memory://'],
      ...['--bind-failure', 'unready', '--http', `127.0.0.1:${httpPort}`],
    ]);
    try {
      await cli.waitFor(/"http listening"/);
      const r = await readyz(httpPort);
      expect(r.status).toBe(503);
      expect(r.body.checks['listeners']).toMatchObject({
        ok: false,
        error: expect.stringContaining(`broker ${nodeId}'s port 127.0.0.1:${brokerPort}`),
      });
      expect(r.body.checks['store']!.ok).toBe(true);
      expect(r.body.checks['broker']!.ok).toBe(true);
      expect(cli.output()).toMatch(new RegExp(`"event":"cannot listen for broker".*"port":${brokerPort}`));
      expect(cli.output()).toMatch(/"event":"not ready".*listeners: broker/);
      await release(blocker);
      // Retried every 5 s.
      await eventually(
        'readyz 200 once the port is free',
        async () => (await readyz(httpPort)).status === 200,
      );
      expect(cli.output()).toMatch(new RegExp(`"event":"listening".*"port":${brokerPort},"retried":true`));
      expect(cli.output()).toContain('"event":"ready again"');
      await produceAndConsume(kafkajsClient, { bootstrap: `127.0.0.1:${base}` }, { count: 20 });
    } finally {
      await release(blocker).catch(() => undefined);
      expect(await cli.stop()).toBe(0);
    }
  });
});

describe('a proxy started before its cluster', () => {
  test('/readyz opens the broker ports once the cluster answers, and is 200 only then', async () => {
    // The bootstrap address is a forwarder to the broker that is not there yet.
    const forwardPort = await freePort();
    const [kafkaHost, kafkaPort] = kafka.split(',')[0]!.split(':') as [string, string];
    const base = await freePortRange();
    const httpPort = await freePort();
    const cli = startCli([
      ...['--bootstrap-server', `127.0.0.1:${forwardPort}`, '--listen', `127.0.0.1:${base}`],
      ...['--store', 'memory://', '--http', `127.0.0.1:${httpPort}`, '--request-timeout-ms', '2000'],
    ]);
    let forwarder: net.Server | undefined;
    try {
      await cli.waitFor(/"http listening"/);
      const before = await readyz(httpPort);
      expect(before.status).toBe(503);
      expect(before.body.checks['broker']!.ok).toBe(false);
      expect(cli.output()).not.toMatch(/"role":"broker"/);
      forwarder = net.createServer((client) => {
        const upstream = net.connect({ host: kafkaHost, port: Number(kafkaPort) });
        client.pipe(upstream).pipe(client);
        client.on('error', () => upstream.destroy());
        upstream.on('error', () => client.destroy());
      });
      await new Promise<void>((r) => forwarder!.listen({ host: '127.0.0.1', port: forwardPort }, () => r()));
      await eventually('readyz 200', async () => (await readyz(httpPort)).status === 200);
      // No client has connected: the readiness check opened the broker's port.
      expect(cli.output()).toMatch(
        new RegExp(`"role":"broker","node":${nodeId},"host":"127.0.0.1","port":${base + 1 + nodeId}`),
      );
      await new Promise<void>((resolve, reject) => {
        const s = net.connect({ host: '127.0.0.1', port: base + 1 + nodeId }, () => {
          s.destroy();
          resolve();
        });
        s.once('error', reject);
      });
    } finally {
      expect(await cli.stop()).toBe(0);
      forwarder?.close();
    }
  });
});

describe('store health', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.kill();
  });

  test('Redis down at start, up, down again: log lines naming host:port, kop_store_up, /readyz, refused commits logged', async () => {
    const topic = uniqueName('health');
    await createTopics({ bootstrap: kafka }, [{ topic, partitions: 1 }]);
    await redis.stop();
    const base = await freePortRange();
    const httpPort = await freePort();
    const target = `127.0.0.1:${redis.port}`;
    const cli = startCli([
      ...['--bootstrap-server', kafka, '--listen', `127.0.0.1:${base}`, '--http', `127.0.0.1:${httpPort}`],
      ...['--store', `redis://${target}`, '--store-timeout-ms', '2000', '--lag-interval-ms', '0'],
    ]);
    try {
      await cli.waitFor(/"event":"offset store not answering at start"/);
      expect(cli.output()).toMatch(
        new RegExp(
          `"event":"offset store not answering at start".*"target":"${target}","error":"connection refused to ${target}"`,
        ),
      );
      expect(cli.output()).not.toContain('"offset store open"');
      await cli.waitFor(/"http listening"/);
      expect(await metric(httpPort, 'kop_store_up')).toBe('kop_store_up 0');
      expect(await metric(httpPort, 'kop_build_info')).toMatch(
        /^kop_build_info\{version="[^"]+",node="v\d+[^"]*",store="redis"\} 1$/,
      );
      const down = await readyz(httpPort);
      expect(down.status).toBe(503);
      expect(down.body.checks['store']!.error).toBe(`redis store: ping: connection refused to ${target}`);

      const group = uniqueName('health-group');
      const bootstrap = `127.0.0.1:${base}`;
      // COORDINATOR_LOAD_IN_PROGRESS once the store circuit is open (the start's ping found Redis down).
      expect([ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS]).toContain(
        await commitOnce(bootstrap, group, topic, 5n),
      );
      await cli.waitFor(/"event":"commits refused"/);
      expect(cli.output()).toMatch(
        new RegExp(
          `"level":"warn","event":"commits refused".*"reason":"store_down".*"storeError":"connection refused to ${target}"`,
        ),
      );

      await redis.start();
      await cli.waitFor(/"event":"offset store answers again"/);
      expect(cli.output()).toMatch(new RegExp(`"event":"offset store answers again".*"target":"${target}"`));
      await eventually(
        'kop_store_up 1',
        async () => (await metric(httpPort, 'kop_store_up')) === 'kop_store_up 1',
      );
      await eventually('readyz 200', async () => (await readyz(httpPort)).status === 200);
      expect(await commitOnce(bootstrap, group, topic, 6n)).toBe(ErrorCode.NONE);

      await redis.kill();
      await cli.waitFor(/"event":"offset store not answering",/);
      await eventually(
        'kop_store_up 0',
        async () => (await metric(httpPort, 'kop_store_up')) === 'kop_store_up 0',
      );
      await redis.start();
    } finally {
      expect(await cli.stop()).toBe(0);
    }
  });

  test('behind Sentinel, a master that stops answering is named, not the sentinels', async () => {
    // No failover during the test: the master stays frozen until it is let go.
    const set = await startRedisSentinel({ sentinels: 1, downAfterMs: 60_000 });
    const base = await freePortRange();
    const master = set.data[0]!;
    const cli = startCli([
      ...['--bootstrap-server', kafka, '--listen', `127.0.0.1:${base}`, '--store', set.url],
      ...['--store-timeout-ms', '1000', '--lag-interval-ms', '0'],
    ]);
    try {
      await cli.waitFor(/"event":"offset store open"/);
      process.kill(master.pid!, 'SIGSTOP');
      await cli.waitFor(/"event":"offset store not answering"/, 20_000);
      expect(cli.output()).toMatch(
        new RegExp(
          `"event":"offset store not answering".*"error":"the master ${set.masterName} at 127\\.0\\.0\\.1:${master.port} accepts connections but does not answer"`,
        ),
      );
      process.kill(master.pid!, 'SIGCONT');
      await cli.waitFor(/"event":"offset store answers again"/, 20_000);
    } finally {
      if (master.pid !== undefined) process.kill(master.pid, 'SIGCONT');
      expect(await cli.stop()).toBe(0);
      await set.stop();
    }
  });

  test('refused commits are logged at a bounded rate, with counts', async () => {
    const base = await freePortRange();
    const cli = startCli([
      ...['--bootstrap-server', kafka, '--listen', `127.0.0.1:${base}`, '--store', 'memory://'],
    ]);
    try {
      await cli.waitFor(/"event":"listening"/);
      const group = uniqueName('unknown-topic-group');
      // Unknown topics are refused by default, as by a broker; 20 refusals, one line at first.
      for (let i = 0; i < 20; i++) {
        expect(await commitOnce(`127.0.0.1:${base}`, group, `no-such-topic-${group}`, BigInt(i))).toBe(
          ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        );
      }
      // The rest are summed into the next line, 10 s after the first.
      await cli.waitFor(/"commits":19/, 30_000);
      const lines = cli
        .output()
        .split('\n')
        .filter((l) => l.includes('"commits refused"'));
      expect(lines).toHaveLength(2);
      expect(lines[0]).toMatch(/"level":"warn".*"reason":"unknown_topic".*"commits":1,"partitions":1/);
      expect(lines[1]).toMatch(/"reason":"unknown_topic".*"commits":19,"partitions":19/);
    } finally {
      expect(await cli.stop()).toBe(0);
    }
  });
});

describe('secrets', () => {
  test('no password of any store URL form appears in logs, metrics, readiness answers or offsets CLI errors', async () => {
    // A Redis that wants a password, given the wrong one: the authentication path too.
    const guarded = await startRedis();
    expect(await redisCommand('127.0.0.1', guarded.port, 'CONFIG SET requirepass right-SECRET-0')).toBe(
      '+OK',
    );
    const down = await freePort();
    const down2 = await freePort();
    const forms = [
      `redis://app:wrong-SECRET-1@127.0.0.1:${guarded.port}`,
      `redis://127.0.0.1:${down}?password=SECRET-2`,
      `rediss://:SECRET-3@127.0.0.1:${down}/2`,
      `redis+sentinel://u:SECRET-4@127.0.0.1:${down},127.0.0.1:${down2}/mymaster?sentinelPassword=SECRET-5`,
      `redis+cluster://:SECRET-6@127.0.0.1:${down},127.0.0.1:${down2}`,
      `zk://kop:SECRET-7@127.0.0.1:${down}/kop`,
    ];
    try {
      const outputs = await Promise.all(
        forms.map(async (store, i) => {
          const base = await freePortRange();
          const httpPort = await freePort();
          const cli = startCli([
            ...['--bootstrap-server', kafka, '--listen', `127.0.0.1:${base}`, '--store', store],
            ...['--http', `127.0.0.1:${httpPort}`, '--store-timeout-ms', '1500', '--lag-interval-ms', '500'],
            ...['--log-level', 'debug', '--log-format', i % 2 === 0 ? 'json' : 'text'],
          ]);
          let seen = '';
          try {
            await cli.waitFor(/http listening/);
            await cli.waitFor(/offset store not answering/, 20_000);
            seen += JSON.stringify((await readyz(httpPort)).body);
            seen += await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
            seen += String(
              await commitOnce(`127.0.0.1:${base}`, 'g', '__consumer_offsets', 1n).catch((e) => e),
            );
            seen += await (await fetch(`http://127.0.0.1:${httpPort}/admin/groups`)).text();
          } finally {
            await cli.stop();
          }
          const get = startCli([
            'offsets',
            'get',
            '--store',
            store,
            '--group',
            'g',
            '--store-timeout-ms',
            '1500',
          ]);
          const groups = startCli(['offsets', 'groups', '--store', store, '--store-timeout-ms', '1500']);
          const codes = [await get.exited, await groups.exited];
          return { store, text: cli.output() + seen + get.output() + groups.output(), codes };
        }),
      );
      for (const { store, text, codes } of outputs) {
        expect(text, store).not.toMatch(/SECRET/);
        expect(codes, store).toEqual([4, 4]);
        // The errors name the target instead.
        expect(text, store).toMatch(/127\.0\.0\.1:\d+/);
      }
      expect(outputs[0]!.text).toContain(`authentication refused by 127.0.0.1:${guarded.port}`);
      expect(outputs[1]!.text).toContain(`connection refused to 127.0.0.1:${down}`);
    } finally {
      await guarded.kill();
    }
  }, 180_000);
});
