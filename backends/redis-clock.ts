/**
 * How far a Redis server's clock is ahead of this process's clock, as a lower bound, so that a
 * commit can carry a validity in Redis's clock (redis-store.ts) that has certainly passed once
 * the local deadline has.
 *
 * A probe takes local time t0, asks TIME (r), takes local time t1. TIME was read at some local
 * instant in [t0, t1], so the skew (Redis clock minus local clock) lies in [r - t1, r - t0]; the
 * lower bound r - t1 is what is kept. At local time T the server's clock then reads at least
 * T + (r - t1): a script that compares TIME with `T + bound` and stops when TIME is later cannot
 * run after local T. The local clock is monotonic (performance.timeOrigin + performance.now()):
 * a jump of the wall clock does not move it. Redis's TIME is its wall clock: a server whose
 * clock steps back by more than MARGIN_MS between probes can still run a script late (NTP slews
 * by at most 0.5 ms/s, far less over the SAMPLE_TTL_MS a bound is kept).
 *
 * Bounds are kept per server connection: a connection that closes takes its samples with it (the
 * next one may reach another server, after a Sentinel failover), and the best (largest) bound of
 * the last SAMPLE_TTL_MS is used, so one slow probe does not shorten every commit's validity.
 */
import type { Redis } from 'ioredis';

/** Milliseconds since an arbitrary origin, never going back. */
export const localNow = (): number => performance.timeOrigin + performance.now();

/** Subtracted from every bound: rounding, and drift of the server's clock between probes. */
export const MARGIN_MS = 20;
/** How long a sample counts. */
export const SAMPLE_TTL_MS = 15_000;
/** Background probes of every known server this often (so commits rarely wait for one). */
export const PROBE_EVERY_MS = 5_000;

interface Sample {
  /** Lower bound of the skew, ms. */
  low: number;
  /** Local time of the sample. */
  at: number;
}

export class RedisClock {
  private readonly samples = new WeakMap<Redis, Sample[]>();
  /** Counts each server connection's closes, so a probe answered across a reconnect is not kept. */
  private readonly epochs = new WeakMap<Redis, number>();

  /** The best recent bound of `node`, or undefined when there is none. */
  known(node: Redis): number | undefined {
    const list = this.samples.get(node);
    if (list === undefined) return undefined;
    const since = localNow() - SAMPLE_TTL_MS;
    let best: number | undefined;
    for (const s of list) if (s.at >= since && (best === undefined || s.low > best)) best = s.low;
    return best;
  }

  /** Probes `node` and returns its best bound (this probe's when it straddled a reconnect). */
  async probe(node: Redis): Promise<number> {
    this.watch(node);
    const epoch = this.epochs.get(node);
    const t0 = localNow();
    const [seconds, micros] = await node.time();
    const t1 = localNow();
    const low = Number(seconds) * 1000 + Number(micros) / 1000 - t1;
    if (!Number.isFinite(low) || t1 < t0) throw new Error(`redis store: TIME answered ${seconds} ${micros}`);
    if (this.epochs.get(node) !== epoch) return low;
    const list = (this.samples.get(node) ?? []).filter((s) => s.at >= t1 - SAMPLE_TTL_MS);
    list.push({ low, at: t1 });
    this.samples.set(node, list);
    return this.known(node) ?? low;
  }

  /** Probes the nodes whose newest sample is older than PROBE_EVERY_MS (errors are ignored). */
  refresh(nodes: Redis[]): void {
    const due = localNow() - PROBE_EVERY_MS;
    for (const node of nodes) {
      const newest = this.samples.get(node)?.at(-1)?.at;
      if (newest === undefined || newest < due) this.probe(node).catch(() => undefined);
    }
  }

  private watch(node: Redis): void {
    if (this.epochs.has(node)) return;
    this.epochs.set(node, 0);
    node.on('close', () => {
      this.samples.delete(node);
      this.epochs.set(node, (this.epochs.get(node) ?? 0) + 1);
    });
  }
}
