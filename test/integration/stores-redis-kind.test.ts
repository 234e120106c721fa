// Issue 40: readiness and logs tell the truth about writes, on real redis-servers. A store URL of
// the wrong kind (redis+cluster:// at a standalone server, a sentinel URL at a plain server) is
// refused at start with exit 2 and the server's own answer. A Redis that answers pings but cannot
// take the proxy's writes (a read-only replica, a refused password) turns /readyz to 503 with
// Redis's reason, and the log names it.
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { createTopics } from '../bed/clients/kafkajs.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { freePort } from '../bed/ports.js';
import { startRedis } from '../bed/redis.js';
import type { RedisServer } from '../bed/redis.js';
import { redisCommand } from '../bed/resp.js';
import { commitOnce, startCli } from '../harness/cli-process.js';
import { ensureBuilt, freePortRange } from '../harness/proxy.js';
import { sleep } from '../reliability/commit-checker.js';

const brokerBootstrap = inject('kafkaBootstrap');

let plain: RedisServer;
beforeAll(async () => {
  await ensureBuilt();
  plain = await startRedis();
});
afterAll(async () => {
  await plain?.kill();
});

describe('a store URL of the wrong kind is refused at start with the server’s reason', () => {
  test.each([
    [
      'redis+cluster:// at a standalone server',
      (p: number) => `redis+cluster://127.0.0.1:${p}`,
      /cluster support disabled/,
    ],
    [
      'a sentinel URL at a plain server',
      (p: number) => `redis+sentinel://127.0.0.1:${p}/mymaster`,
      /not a Redis Sentinel.*SENTINEL/,
    ],
  ])('%s: exit 2', async (_name, url, reason) => {
    const cli = startCli([
      '--bootstrap-server',
      brokerBootstrap,
      '--listen',
      `127.0.0.1:${await freePortRange()}`,
      '--store',
      url(plain.port),
    ]);
    expect(await cli.exited, cli.output()).toBe(2);
    expect(cli.output()).toContain('invalid configuration: store=');
    expect(cli.output()).toMatch(reason);
  });
});

/** /readyz until its store check fails (the probe needs a failed write first: one commit). */
async function unreadyStore(http: number, bootstrap: string, topic: string): Promise<string> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    await commitOnce(bootstrap, `${topic}-g`, topic, 5n).catch(() => -1);
    const res = await fetch(`http://127.0.0.1:${http}/readyz`);
    const body = (await res.json()) as { checks: { store: { ok: boolean; error?: string } } };
    if (res.status === 503 && !body.checks.store.ok) return body.checks.store.error ?? '';
    if (Date.now() > deadline) throw new Error(`still ready: ${JSON.stringify(body)}`);
    await sleep(300);
  }
}

describe('a Redis that cannot take writes turns /readyz to 503 with its reason', () => {
  test.each([
    ['a read-only replica', 'replica', /READONLY/],
    ['a refused password', 'password', /authentication refused|WRONGPASS|NOAUTH/],
  ])('%s', { timeout: 120_000 }, async (_name, kind, reason) => {
    const topic = uniqueName(`redis-${kind}`);
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 1 }]);
    const server =
      kind === 'replica'
        ? await startRedis({ extraArgs: ['--replicaof', '127.0.0.1', String(plain.port)] })
        : await startRedis();
    // Set after the start: the bed waits for an unauthenticated PING.
    if (kind === 'password')
      await redisCommand('127.0.0.1', server.port, 'CONFIG SET requirepass the-right-password');
    const port = await freePortRange();
    const http = await freePort();
    const url = kind === 'replica' ? server.url : `redis://:wrong-password@127.0.0.1:${server.port}`;
    const cli = startCli([
      '--bootstrap-server',
      brokerBootstrap,
      '--listen',
      `127.0.0.1:${port}`,
      '--http',
      `127.0.0.1:${http}`,
      '--store',
      url,
    ]);
    try {
      await cli.waitFor(/"http listening"/);
      const error = await unreadyStore(http, `127.0.0.1:${port}`, topic);
      expect(error).toMatch(reason);
      await cli.waitFor(/"not ready"/);
      const logged = cli
        .output()
        .split('\n')
        .filter((l) => /offset store (failing|not answering)|"not ready"/.test(l));
      expect(
        logged.some((l) => reason.test(l)),
        cli.output(),
      ).toBe(true);
      expect(cli.output()).not.toContain('wrong-password');
    } finally {
      await cli.stop('SIGKILL');
      await server.kill();
    }
  });
});
