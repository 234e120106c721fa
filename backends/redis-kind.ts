/**
 * At start, whether the Redis servers a URL names are of the kind its scheme says: redis+cluster://
 * at a standalone server, or redis+sentinel:// at a plain server, would otherwise start, answer
 * pings, and fail every commit with a reason no one sees (issue 40). Each endpoint is asked once,
 * on its own short-lived connection; the server's own answer is the reason given ("ERR This
 * instance has cluster support disabled"). An endpoint that does not answer proves nothing: the
 * proxy may start before its store, so the check passes and readiness tells the rest. A data
 * server is also asked whether it can confirm commits as the URL asks (WAITAOF: redis-confirm.ts);
 * behind Sentinel the master is not asked here: a commit's own error names the problem.
 */
import { Redis } from 'ioredis';
import { confirmationProblem } from './redis-confirm.js';
import type { RedisEndpoint, RedisTarget } from './redis-url.js';

/** What the server says about itself that the scheme must agree with. */
async function problemAt(target: RedisTarget, e: RedisEndpoint, timeoutMs: number): Promise<string | null> {
  const sentinel = target.mode === 'sentinel';
  const client = new Redis({
    host: e.host,
    port: e.port,
    username: sentinel ? undefined : target.username,
    password: sentinel ? (target.sentinelPassword ?? target.password) : target.password,
    ...(target.tls ? { tls: {} } : {}),
    lazyConnect: true,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableReadyCheck: false,
    enableOfflineQueue: false,
  });
  client.on('error', () => undefined);
  const where = `${e.host}:${e.port}`;
  try {
    try {
      await client.connect();
    } catch {
      return null; // not answering (or refusing the credentials): readiness reports it
    }
    const info = String(await client.call('INFO', 'server')).concat(
      sentinel ? '' : String(await client.call('INFO', 'cluster').catch(() => '')),
    );
    const field = (name: string): string | undefined => new RegExp(`^${name}:(\\S+)`, 'm').exec(info)?.[1];
    const mode = field('redis_mode');
    const call = (command: string, ...args: string[]) => client.call(command, ...args);
    if (target.mode === 'cluster') {
      // The server's own refusal of the cluster commands the client depends on.
      const refused = await client.call('CLUSTER', 'INFO').then(
        () => null,
        (err: unknown) => (err as Error).message,
      );
      if (refused !== null)
        return `${where} is not a Redis Cluster node (redis_mode:${mode ?? '?'}): the server answers CLUSTER INFO with "${refused}"; use redis:// for a standalone server`;
      return await confirmationProblem(call, target, where);
    }
    if (sentinel) {
      if (mode === 'sentinel') {
        const master = (await client.call('SENTINEL', 'get-master-addr-by-name', target.sentinelMaster!)) as
          string[] | null;
        return master === null
          ? `the sentinel ${where} does not monitor a master named ${JSON.stringify(target.sentinelMaster)}`
          : null;
      }
      const refused = await client.call('SENTINEL', 'get-master-addr-by-name', target.sentinelMaster!).then(
        () => 'it answers SENTINEL commands',
        (err: unknown) => `the server answers SENTINEL with "${(err as Error).message}"`,
      );
      return `${where} is not a Redis Sentinel (redis_mode:${mode ?? '?'}): ${refused}; use redis:// for a plain server`;
    }
    if (mode === 'sentinel')
      return `${where} is a Redis Sentinel (redis_mode:sentinel), not a data server: use redis+sentinel://${where}/<master>`;
    if (field('cluster_enabled') === '1')
      return `${where} is a Redis Cluster node (cluster_enabled:1): use redis+cluster:// (a standalone client gets MOVED for the keys of other nodes)`;
    return await confirmationProblem(call, target, where);
  } catch {
    return null; // a connection that broke half-way proves nothing either
  } finally {
    client.disconnect();
  }
}

/** The first endpoint that answers as the wrong kind of server, in words; null when none does. */
export async function redisKindProblem(target: RedisTarget, timeoutMs: number): Promise<string | null> {
  const problems = await Promise.all(target.endpoints.map((e) => problemAt(target, e, timeoutMs)));
  return problems.find((p) => p !== null) ?? null;
}
