/**
 * The built-in routes: /healthz (the process answers), /readyz (the proxy can serve a client end to
 * end: every listener it needs is bound, the offset store answers and has not lost its data, and a
 * broker answers), /metrics (Prometheus text format, token-protected). A change of readiness is
 * logged with its reason.
 */
import type { Registry } from 'prom-client';
import type { Logger } from '../../common/log.js';
import { silentLogger } from '../../common/log.js';
import type { OpsHttpServer } from './http-server.js';

export interface ReadinessChecks {
  /** Resolves when the offset store answers (OffsetStore.ping). */
  store(): Promise<void>;
  /** Resolves when a broker answers (e.g. a Metadata request through the cluster client). */
  broker(): Promise<void>;
  /** Resolves when every listener the proxy needs is bound; rejects naming the ports that are not. */
  listeners?(): Promise<void>;
  /** Rejects, with the reason, once the store is known to have lost its data (sticky). */
  storeData?(): Promise<void>;
}

export interface OpsRoutesOptions {
  registry: Registry;
  readiness: ReadinessChecks;
  /** Each readiness check fails after this long. Default 5000. */
  checkTimeoutMs?: number;
  /** Where a change of readiness (ready → not ready and back) is logged. */
  log?: Logger;
}

type CheckResult = { ok: true; ms: number } | { ok: false; ms: number; error: string };

export function registerOpsRoutes(server: OpsHttpServer, opts: OpsRoutesOptions): void {
  const started = Date.now();
  const timeoutMs = opts.checkTimeoutMs ?? 5000;
  const log = opts.log ?? silentLogger;
  let wasReady: boolean | null = null;

  server.addRoute(
    'GET',
    '/healthz',
    () => ({ status: 200, json: { status: 'ok', uptimeSeconds: Math.round((Date.now() - started) / 1000) } }),
    { public: true },
  );

  server.addRoute(
    'GET',
    '/readyz',
    async () => {
      const { listeners: listenersCheck, storeData } = opts.readiness;
      const [store, broker, listeners, data] = await Promise.all([
        check(() => opts.readiness.store(), timeoutMs),
        check(() => opts.readiness.broker(), timeoutMs),
        listenersCheck ? check(() => listenersCheck(), timeoutMs) : undefined,
        storeData ? check(() => storeData(), timeoutMs) : undefined,
      ]);
      const checks = {
        ...(listeners ? { listeners } : {}),
        store,
        broker,
        ...(data ? { storeData: data } : {}),
      };
      const failing = Object.entries(checks).filter(([, c]) => !c.ok);
      const ready = failing.length === 0;
      if (ready !== wasReady) {
        if (!ready) {
          log.warn('not ready', {
            reason: failing.map(([name, c]) => `${name}: ${c.ok ? '' : c.error}`).join('; '),
          });
        } else if (wasReady === false) log.info('ready again');
        wasReady = ready;
      }
      return {
        status: ready ? 200 : 503,
        json: { status: ready ? 'ready' : 'not ready', checks },
      };
    },
    { public: true },
  );

  server.addRoute('GET', '/metrics', async () => ({
    status: 200,
    text: await opts.registry.metrics(),
    contentType: opts.registry.contentType,
  }));
}

async function check(run: () => Promise<void>, timeoutMs: number): Promise<CheckResult> {
  const t0 = performance.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      run(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
    return { ok: true, ms: Math.round(performance.now() - t0) };
  } catch (err) {
    // The message only: error objects of store clients can carry connection strings.
    return {
      ok: false,
      ms: Math.round(performance.now() - t0),
      error: (err as Error).message ?? String(err),
    };
  } finally {
    clearTimeout(timer);
  }
}
