/**
 * Expiry of the embedded store's request records (the commit outcomes kept for idempotent
 * resends): every 10 s, those older than the TTL are removed in write transactions of `batch`
 * records, so that none holds LMDB's one writer or the event loop long, and batch after batch
 * until none is left: a fixed amount per tick fell behind commit rates above it, and the records
 * piled up. Each batch is a range that ends at the cutoff time by construction (requests-v3 and
 * request-times keys start with the time): requests-v3 loses leaves from its start, requests-v2
 * records one by one.
 */
import type { EmbeddedDatabases } from './embedded-databases.js';
import { settle } from './embedded-group-commit.js';
import { issuedBound, requestKeyOf, timeBound } from './embedded-keys.js';

const SWEEP_INTERVAL_MS = 10_000;

export class RequestSweep {
  private readonly timer: NodeJS.Timeout;
  private sweeping = false;
  private stopped = false;

  constructor(
    private readonly db: EmbeddedDatabases,
    /** Settles once the databases are in the current layout. */
    private readonly ready: Promise<void>,
    private readonly ttlMs: number,
    private readonly batch: number,
  ) {
    this.timer = setInterval(() => void this.sweep().catch(() => undefined), SWEEP_INTERVAL_MS);
    this.timer.unref();
  }

  /** No sweep starts after this; one running stops after its current batch. */
  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
  }

  /** One sweep to the end (a no-op while another runs or after stop()). */
  async sweep(): Promise<void> {
    if (this.stopped || this.sweeping) return;
    this.sweeping = true;
    try {
      await this.ready;
      const { root, requests, requestTimes, orderedRequests } = this.db;
      for (;;) {
        const cutoff = Date.now() - this.ttlMs;
        let removed = 0;
        await settle(
          'embedded store: sweep',
          root.transaction(() => {
            for (const key of orderedRequests.getKeys({ end: issuedBound(cutoff), limit: this.batch })) {
              orderedRequests.removeSync(key);
              removed++;
            }
            if (removed >= this.batch) return;
            const limit = this.batch - removed;
            for (const key of requestTimes.getKeys({ end: timeBound(cutoff), limit })) {
              requests.removeSync(requestKeyOf(key));
              requestTimes.removeSync(key);
              removed++;
            }
          }),
        );
        if (removed < this.batch || this.stopped) return;
      }
    } finally {
      this.sweeping = false;
    }
  }
}
