// /readyz as an outage test sees it: polled while the store is away, never throwing (a proxy that
// does not answer is status 0 with the error, for the report), and judged afterwards.
import { sleep } from '../reliability/commit-checker.js';

export interface Readiness {
  status: number;
  body: string;
}

export async function readyz(httpPort: number): Promise<Readiness> {
  try {
    const r = await fetch(`http://127.0.0.1:${httpPort}/readyz`, { signal: AbortSignal.timeout(5_000) });
    return { status: r.status, body: await r.text() };
  } catch (e) {
    return { status: 0, body: String(e) };
  }
}

/** Polls /readyz about every 2 s until `untilMs` (a Date.now() time); returns every answer. */
export async function pollReadiness(httpPort: number, untilMs: number): Promise<Readiness[]> {
  const seen: Readiness[] = [];
  while (Date.now() < untilMs) {
    seen.push(await readyz(httpPort));
    await sleep(Math.min(2_000, Math.max(0, untilMs - Date.now())));
  }
  return seen;
}
