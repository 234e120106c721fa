// The real CLI (bin/kafka-offset-proxy.js over dist/, built if stale) as a child process.
import { spawnSync } from 'node:child_process';
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
import { ensureBuilt, spawnProxy } from '../harness/proxy.js';
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
