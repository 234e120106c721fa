/**
 * What a Redis commit waits for after its script before it is acknowledged, as the operator chose
 * in the store URL: WAIT (`?wait=N`: N replicas have received every write of this connection) and
 * WAITAOF (`?waitAofLocal=1`, `?waitAofReplicas=N`, Redis 7.2+ or Valkey: the primary's and N
 * replicas' append-only files hold them, fsynced), both within `waitTimeoutMs`. They run in the
 * commit's own pipeline, on the connection that wrote it; a shortfall is put in words here, and the
 * commit is then not acknowledged (the client retries, as after a timeout).
 */
import type { RedisTarget } from './redis-url.js';

export type Confirmations = Pick<RedisTarget, 'wait' | 'waitAofLocal' | 'waitAofReplicas' | 'waitTimeoutMs'>;

/** The pipeline methods the confirmations use (ioredis has no WAITAOF method: `call`). */
export interface ConfirmingPipeline<P> {
  wait(replicas: number, timeoutMs: number): P;
  call(command: string, ...args: (string | number)[]): P;
}

/** Whether a commit waits for anything after its script. */
export function confirmsAnything(c: Confirmations): boolean {
  return c.wait > 0 || c.waitAofLocal > 0 || c.waitAofReplicas > 0;
}

/** `pipeline` with WAIT and/or WAITAOF appended, as `c` asks. */
export function appendConfirmations<P extends ConfirmingPipeline<P>>(pipeline: P, c: Confirmations): P {
  let p = pipeline;
  if (c.wait > 0) p = p.wait(c.wait, c.waitTimeoutMs);
  if (c.waitAofLocal > 0 || c.waitAofReplicas > 0)
    p = p.call('WAITAOF', c.waitAofLocal, c.waitAofReplicas, c.waitTimeoutMs);
  return p;
}

/**
 * What the confirmations' replies (those after the commit's own in its pipeline) fall short of, in
 * words ("reached 0 of 1 replicas within 500 ms"); null when every one was met. A reply that is an
 * error (a server without WAITAOF, WAITAOF's numlocal where appendonly is off) is thrown.
 */
export function confirmationShortfall(replies: [Error | null, unknown][], c: Confirmations): string | null {
  const missing: string[] = [];
  let i = 0;
  if (c.wait > 0) {
    const [err, value] = replies[i++]!;
    if (err !== null) throw err;
    const acked = Number(value);
    if (acked < c.wait) missing.push(`reached ${acked} of ${c.wait} replicas`);
  }
  if (c.waitAofLocal > 0 || c.waitAofReplicas > 0) {
    const [err, value] = replies[i++]!;
    if (err !== null) throw err;
    const [local, replicas] = (value as unknown[]).map(Number) as [number, number];
    if (local < c.waitAofLocal) missing.push("was not fsynced to the primary's append-only file");
    if (replicas < c.waitAofReplicas)
      missing.push(`was fsynced to the append-only files of ${replicas} of ${c.waitAofReplicas} replicas`);
  }
  return missing.length === 0 ? null : `${missing.join(' and ')} within ${c.waitTimeoutMs} ms`;
}

/**
 * Why the server asked with `call` cannot confirm commits as `c` asks, in words naming `where`;
 * null when it can. WAITAOF needs Redis 7.2+ or Valkey (older servers answer it with "unknown
 * command" at every commit), and `waitAofLocal` the append-only file on.
 */
export async function confirmationProblem(
  call: (command: string, ...args: string[]) => Promise<unknown>,
  c: Confirmations,
  where: string,
): Promise<string | null> {
  if (c.waitAofLocal === 0 && c.waitAofReplicas === 0) return null;
  const [info] = (await call('COMMAND', 'INFO', 'WAITAOF')) as unknown[];
  if (info === null || info === undefined) {
    const version = /^redis_version:(\S+)/m.exec(String(await call('INFO', 'server')))?.[1] ?? '?';
    return `waitAofLocal and waitAofReplicas need WAITAOF (Redis 7.2+ or Valkey); ${where} runs Redis ${version}: use wait= for replicas, appendfsync always for the primary's disk`;
  }
  if (c.waitAofLocal > 0 && !/^aof_enabled:1/m.test(String(await call('INFO', 'persistence'))))
    return `waitAofLocal=1 needs the append-only file on ${where} (appendonly yes); it is off`;
  return null;
}
