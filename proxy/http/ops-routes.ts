/**
 * The built-in routes: /healthz (the process answers), /readyz (the offset store answers and at
 * least one broker is reachable), /metrics (Prometheus text format, token-protected).
 */
import type { Registry } from 'prom-client';
import type { OpsHttpServer } from './http-server.js';

export interface ReadinessChecks {
  /** Resolves when the offset store answers (OffsetStore.ping). */
  store(): Promise<void>;
  /** Resolves when a broker answers (e.g. a Metadata request through the cluster client). */
  broker(): Promise<void>;
}

export interface OpsRoutesOptions {
  registry: Registry;
  readiness: ReadinessChecks;
  /** Each readiness check fails after this long. Default 5000. */
  checkTimeoutMs?: number;
}

type CheckResult = { ok: true; ms: number } | { ok: false; ms: number; error: string };

export function registerOpsRoutes(server: OpsHttpServer, opts: OpsRoutesOptions): void {
  const started = Date.now();
  const timeoutMs = opts.checkTimeoutMs ?? 5000;

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
      const [store, broker] = await Promise.all([
        check(() => opts.readiness.store(), timeoutMs),
        check(() => opts.readiness.broker(), timeoutMs),
      ]);
      const ready = store.ok && broker.ok;
      return {
        status: ready ? 200 : 503,
        json: { status: ready ? 'ready' : 'not ready', checks: { store, broker } },
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
