// The real CLI (bin/kafka-offset-proxy.js over dist/, built if stale) as a child process.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, inject, test } from 'vitest';
import { decodeResponseFrame } from '../../protocol/frames.js';
import { encodeRequestFrame } from '../../protocol/frames.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { defaultFetchPartition, defaultFetchRequest } from '../../protocol/messages/fetch-request.js';
import { kafkajsClient } from '../bed/clients/kafkajs.js';
import { createTopics } from '../bed/clients/kafkajs.js';
import { produceAndConsume, uniqueName } from '../bed/clients/scenarios.js';
import { freePort } from '../bed/ports.js';
import { commitOnce } from '../harness/cli-process.js';
import { ensureBuilt, freePortRange, spawnProxy } from '../harness/proxy.js';
import { RawClient } from '../harness/raw-client.js';

const brokerBootstrap = inject('kafkaBootstrap');
const bin = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../bin/kafka-offset-proxy.js');

beforeAll(async () => {
  await ensureBuilt();
}, 120_000);

/** A Fetch v11 on an empty partition that the broker holds for `maxWaitMs` before answering. */
function slowFetch(topic: string, correlationId: number, maxWaitMs: number): Buffer {
  return encodeRequestFrame(
    { apiKey: ApiKey.Fetch, apiVersion: 11, correlationId, clientId: 'cli-test' },
    {
      ...defaultFetchRequest(),
      maxWaitMs,
      minBytes: 1,
      maxBytes: 1 << 20,
      topics: [
        {
          topic,
          topicId: 'AAAAAAAAAAAAAAAAAAAAAA',
          partitions: [{ ...defaultFetchPartition(), partition: 0, partitionMaxBytes: 1 << 20 }],
        },
      ],
    },
  );
}

describe('kafka-offset-proxy CLI', () => {
  test('--bootstrap-server: kafkajs produces and consumes in a group through it', async () => {
    const cli = await spawnProxy(['--bootstrap-server', brokerBootstrap]);
    try {
      await produceAndConsume(kafkajsClient, { bootstrap: cli.bootstrap }, { count: 300 });
    } finally {
      expect(await cli.stop()).toBe(0);
    }
  });

  test('SIGTERM with a request in flight: the response is delivered, then the process exits 0', async () => {
    const topic = uniqueName('cli-sigterm');
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 1 }]);
    const cli = await spawnProxy(['--bootstrap-server', brokerBootstrap]);
    const client = await RawClient.connect(cli.bootstrap);
    let exitedAt = 0;
    const exited = new Promise<number | null>((resolve) =>
      cli.child.once('exit', (code) => {
        exitedAt = Date.now();
        resolve(code);
      }),
    );
    const sentAt = Date.now();
    client.write(slowFetch(topic, 5, 1500));
    // Let the request reach the broker, then ask the proxy to stop.
    await new Promise((r) => setTimeout(r, 200));
    cli.child.kill('SIGTERM');
    const [frame] = await client.read(1, 10_000);
    const answeredAt = Date.now();
    const { header, body } = decodeResponseFrame(frame!, ApiKey.Fetch, 11);
    expect(header.correlationId).toBe(5);
    expect((body as { errorCode: number }).errorCode).toBe(0);
    // The broker held the fetch for its max wait: the proxy really waited for it.
    expect(answeredAt - sentAt).toBeGreaterThanOrEqual(1200);
    expect(await exited).toBe(0);
    expect(exitedAt).toBeGreaterThanOrEqual(answeredAt - 50);
    // No new requests were taken after SIGTERM: the connection is closed.
    expect(await client.closesWithin(2_000)).toBe(true);
    expect(cli.output()).toContain('shutting down');
  });

  test('SIGTERM as soon as clients can connect, the HTTP endpoint still starting: a graceful exit 0', async () => {
    // spawnProxy returns once the proxy logs "listening": the broker listeners, the HTTP endpoint
    // and the lag collector start after that, and a signal then must not end the process by its
    // default action.
    const cli = await spawnProxy([
      ...['--bootstrap-server', brokerBootstrap, '--http', `127.0.0.1:${await freePort()}`],
    ]);
    const code = await cli.stop('SIGTERM');
    expect(code).toBe(0);
    expect(cli.output()).toContain('shutting down');
  });

  test('SIGTERM ends the process within --shutdown-timeout-ms although the store never answers', async () => {
    // A "Redis" that accepts connections and never replies: every store call waits for its
    // deadline (2 minutes here), the lag collector's refresh among them.
    const held: net.Socket[] = [];
    const frozen = net.createServer((s) => held.push(s));
    await new Promise<void>((r) => frozen.listen({ host: '127.0.0.1', port: 0 }, () => r()));
    const storePort = (frozen.address() as net.AddressInfo).port;
    const topic = uniqueName('cli-frozen');
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 1 }]);
    const cli = await spawnProxy([
      ...['--bootstrap-server', brokerBootstrap, '--store', `redis://127.0.0.1:${storePort}`],
      ...['--store-timeout-ms', '120000', '--shutdown-timeout-ms', '3000'],
      ...['--http', `127.0.0.1:${await freePort()}`, '--lag-interval-ms', '200'],
    ]);
    try {
      // A commit in flight, and the lag collector inside a store call.
      const inFlight = commitOnce(cli.bootstrap, uniqueName('frozen-group'), topic, 1n).catch(() => 'closed');
      await new Promise((r) => setTimeout(r, 1000));
      const t0 = Date.now();
      const code = await cli.stop('SIGTERM');
      const took = Date.now() - t0;
      expect(code).toBe(1);
      expect(cli.output()).toMatch(/"event":"shutdown deadline passed: exiting".*"deadlineMs":3000/);
      // Well before any store call could have ended (2 minutes), whatever the machine's load.
      expect(took).toBeLessThan(60_000);
      expect(await inFlight).toBe('closed');
    } finally {
      for (const s of held) s.destroy();
      frozen.close();
    }
  });

  test('SIGTERM to `npx kafka-offset-proxy` stops the proxy (npm passes it to a shell that drops it)', async () => {
    // A project that depends on the proxy: npx finds it in node_modules/.bin and runs it through
    // `sh -c`, as for any installed package.
    const host = mkdtempSync(path.join(os.tmpdir(), 'kop-npx-'));
    writeFileSync(path.join(host, 'package.json'), '{"name":"npx-host","version":"1.0.0","private":true}\n');
    mkdirSync(path.join(host, 'node_modules/.bin'), { recursive: true });
    symlinkSync(bin, path.join(host, 'node_modules/.bin/kafka-offset-proxy'));
    const port = await freePortRange();
    const dataDir = path.join(host, 'data');
    const npx = spawn(
      'npx',
      [
        'kafka-offset-proxy',
        '--bootstrap-server',
        brokerBootstrap,
        '--listen',
        `127.0.0.1:${port}`,
        '--data-dir',
        dataDir,
      ],
      {
        cwd: host,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, npm_config_update_notifier: 'false' },
      },
    );
    let out = '';
    npx.stdout.on('data', (d: Buffer) => (out += d.toString()));
    npx.stderr.on('data', (d: Buffer) => (out += d.toString()));
    // The pipes close when the last process holding them (the proxy) has exited.
    const closed = new Promise<void>((resolve) => npx.once('close', () => resolve()));
    try {
      const deadline = Date.now() + 60_000;
      while (!out.includes('"listening"')) {
        if (Date.now() > deadline || npx.exitCode !== null)
          throw new Error(`npx did not start the proxy:\n${out}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      npx.kill('SIGTERM');
      await Promise.race([
        closed,
        new Promise((_, reject) =>
          setTimeout(() => reject(new Error(`proxy still running:\n${out}`)), 60_000),
        ),
      ]);
      expect(out).toContain('"event":"shutting down"');
      expect(out).toContain('"event":"stopped"');
      await expect(RawClient.connect(`127.0.0.1:${port}`)).rejects.toThrow(/ECONNREFUSED/);
    } finally {
      rmSync(host, { recursive: true, force: true });
    }
  });

  test('--store embedded:<dir>: the proxy and `offsets get` use that directory', async () => {
    const topic = uniqueName('cli-embedded');
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 1 }]);
    const dir = mkdtempSync(path.join(os.tmpdir(), 'kop-embedded-url-'));
    try {
      const cli = await spawnProxy([
        '--bootstrap-server',
        brokerBootstrap,
        '--store',
        `embedded:${dir}/offsets`,
      ]);
      const group = uniqueName('embedded-url');
      try {
        expect(await commitOnce(cli.bootstrap, group, topic, 42n)).toBe(0);
      } finally {
        expect(await cli.stop()).toBe(0);
      }
      expect(cli.output()).toContain(`"offsetStore":"embedded ${dir}/offsets"`);
      const got = spawnSync(
        process.execPath,
        [bin, 'offsets', 'get', '--store', `embedded:${dir}/offsets`, '--group', group],
        {
          encoding: 'utf8',
        },
      );
      expect(got.status, got.stderr).toBe(0);
      expect(JSON.parse(got.stdout)).toMatchObject({ group, topic, partition: 0, offset: '42' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  const bad: [string, string[], RegExp][] = [
    ['an unknown flag', ['--bootstrap-server', '127.0.0.1:9092', '--no-such-flag', 'x'], /no-such-flag/],
    [
      'a non-numeric value',
      ['--bootstrap-server', '127.0.0.1:9092', '--max-in-flight', 'lots'],
      /max-in-flight/,
    ],
    ['a bad host:port', ['--bootstrap-server', 'nohostport'], /bootstrap-server/],
    ['a missing required option', ['--listen', '127.0.0.1:0'], /bootstrap-server/],
  ];
  for (const [what, args, names] of bad) {
    test(`${what} exits non-zero with a one-line error naming it`, () => {
      const r = spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', timeout: 20_000 });
      expect(r.status).not.toBe(0);
      expect(r.status).not.toBeNull();
      const lines = r.stderr.trim().split('\n');
      expect(lines, r.stderr).toHaveLength(1);
      expect(lines[0]).toMatch(names);
      expect(r.stdout.trim()).toBe('');
    });
  }
});
