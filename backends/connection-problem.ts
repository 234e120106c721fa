/**
 * Store connection failures in words that name the server ("connection refused to
 * redis-1:6379"), instead of the client library's own text ("Reached the max retries per request
 * limit"). Used for the errors the stores' callers see (logs, readiness, the offsets CLI) and for
 * the store-health log lines. Never includes a credential: only codes, hosts and ports.
 */
import net from 'node:net';
import { redisReplyCode } from './redis-reply.js';

export interface Endpoint {
  host: string;
  port: number;
  /** What the server is, where the address alone would mislead ("the master mymaster"). */
  role?: string;
}

/** How the client reaches Redis: a failure with nothing else to tell is told by it. */
export type RedisReach = 'standalone' | 'sentinel' | 'cluster';

/**
 * `where` is used when the error does not say which server it is about. Decided by the error's
 * structure only (its `code`, its class, a Redis reply's code), never by its text.
 */
export function describeConnectionError(
  err: unknown,
  where: string,
  reach: RedisReach = 'standalone',
): string {
  const e = (err ?? {}) as NodeJS.ErrnoException & {
    address?: string;
    port?: number;
    hostname?: string;
    lastNodeError?: unknown;
  };
  // ioredis's ClusterAllFailedError carries the last node's own error.
  if (e.lastNodeError !== undefined && e.lastNodeError !== err)
    return describeConnectionError(e.lastNodeError, where, reach);
  const code = e.code;
  const server =
    e.address !== undefined && e.port !== undefined ? `${e.address}:${e.port}` : (e.hostname ?? where);
  switch (code) {
    case 'ECONNREFUSED':
      return `connection refused to ${server}`;
    case 'ETIMEDOUT':
      return `connection to ${server} timed out`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `host ${e.hostname ?? server} not found`;
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return `no route to ${server}`;
    case 'ECONNRESET':
    case 'EPIPE':
      return `connection to ${server} was reset`;
    default:
      break; // any other code, or none: told by the checks below
  }
  const reply = redisReplyCode(err);
  switch (reply) {
    case 'WRONGPASS':
    case 'NOAUTH':
      return `authentication refused by ${where}`;
    case null:
      break;
    default:
      return `${where} answers ${reply}`;
  }
  if (code !== undefined && /^(ERR_SSL|ERR_TLS|CERT_|UNABLE_TO|DEPTH_ZERO|SELF_SIGNED)/.test(code))
    return `TLS handshake with ${server} failed (${code})`;
  if (code === undefined) {
    // ioredis's connectors raise these without a code: all nodes of the slots refresh failed
    // (named by its class, ClusterAllFailedError, which ioredis does not export), or no sentinel
    // answered (a plain Error: the only uncoded one a Sentinel client emits).
    if (e.name === 'ClusterAllFailedError') return `no cluster node answers at ${where}`;
    if (reach === 'sentinel' && e.name === 'Error') return `no sentinel answers at ${where}`;
  }
  return `${code ?? (err instanceof Error ? err.name : 'error')} at ${where}`;
}

/**
 * Why the endpoints do not answer, found by opening a TCP connection to each (within `timeoutMs`):
 * "connection refused to h:p", or "h:p accepts connections but does not answer" when the port is
 * open (a frozen or overloaded server, or one that refuses our credentials).
 */
export async function probeEndpoints(endpoints: readonly Endpoint[], timeoutMs = 1000): Promise<string> {
  const results = await Promise.all(endpoints.map((e) => probe(e, timeoutMs)));
  return results.join('; ');
}

function probe(e: Endpoint, timeoutMs: number): Promise<string> {
  const where = e.role === undefined ? `${e.host}:${e.port}` : `${e.role} at ${e.host}:${e.port}`;
  return new Promise((resolve) => {
    const socket = net.connect({ host: e.host, port: e.port });
    const done = (reason: string): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(reason);
    };
    const timer = setTimeout(() => done(`no TCP answer from ${where} within ${timeoutMs} ms`), timeoutMs);
    socket.once('connect', () => done(`${where} accepts connections but does not answer`));
    socket.once('error', (err) => done(describeConnectionError(err, where)));
  });
}
