/**
 * Notices an offset store that lost its data. A store that was flushed, restarted without
 * persistence, or had its chroot or data file removed answers every wiped group with "no
 * committed offset" and no error, so consumers silently start over from their reset policy. The
 * store's marker (OffsetStore.ensureMarker) is written by the first proxy that opens the store
 * and read back on every reconnect of the store's client, every `intervalMs`, and on readiness
 * checks (at most once a second): gone, or replaced (the store was emptied and another proxy
 * wrote a new marker), means the data the proxy was serving is gone. That is reported once, with
 * an error log line, `kop_store_data_lost` 1 and /readyz 503, and stays so until the proxy is
 * restarted (docs/stores.md says what the operator should do first).
 *
 * A loss while no proxy runs is not noticed: the next proxy to start finds no marker and writes
 * one, as on a new store.
 */
import { randomUUID } from 'node:crypto';
import type { OffsetStore } from '../backends/store.js';
import type { Logger } from './logger.js';

export interface DataLossWatchOptions {
  store: OffsetStore;
  log: Logger;
  /** How often the marker is read back (default 10 s). */
  intervalMs?: number;
  /** Told once, when the loss is found. */
  onLost?: (reason: string) => void;
}

/** Readiness checks read the marker again at most this often. */
const READINESS_RECHECK_MS = 1000;

export class DataLossWatch {
  private expected: Map<string, string> | null = null;
  private lost: string | null = null;
  private running: Promise<void> | null = null;
  private lastCheck = 0;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly candidate = JSON.stringify({ id: randomUUID(), created: new Date().toISOString() });

  constructor(private readonly opts: DataLossWatchOptions) {}

  /** Whether the store has a marker to watch (the memory store has none). */
  get active(): boolean {
    return this.opts.store.ensureMarker !== undefined && this.opts.store.readMarker !== undefined;
  }

  start(): void {
    if (!this.active) return;
    this.opts.store.onReconnect?.(() => void this.tick());
    this.timer = setInterval(() => void this.tick(), this.opts.intervalMs ?? 10_000);
    this.timer.unref();
    void this.tick();
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
  }

  /** For /readyz: rejects with the reason once the loss is known (reading the marker again first). */
  async check(): Promise<void> {
    if (this.lost === null && this.active && performance.now() - this.lastCheck >= READINESS_RECHECK_MS)
      await this.tick();
    if (this.lost !== null) throw new Error(this.lost);
  }

  /** One check at a time; a store that does not answer says nothing about its data. */
  private tick(): Promise<void> {
    if (this.lost !== null || this.stopped) return Promise.resolve();
    this.running ??= this.checkOnce()
      .catch(() => undefined)
      .finally(() => {
        this.lastCheck = performance.now();
        this.running = null;
      });
    return this.running;
  }

  private async checkOnce(): Promise<void> {
    const { store, log } = this.opts;
    if (this.expected === null) {
      this.expected = await store.ensureMarker!(this.candidate);
      log.info('offset store marker', {
        store: store.kind,
        // Whether this proxy wrote it (a new store, or one that was emptied while no proxy ran).
        written: [...this.expected.values()].includes(this.candidate),
        markers: Object.fromEntries(this.expected),
      });
      return;
    }
    const now = await store.readMarker!();
    for (const [place, value] of this.expected) {
      const got = now.get(place);
      if (got === value) continue;
      this.declare(
        got === null || got === undefined
          ? `marker ${place} is gone`
          : `marker ${place} was replaced (${JSON.stringify(got)}, this proxy found ${JSON.stringify(value)})`,
      );
      return;
    }
  }

  private declare(what: string): void {
    if (this.stopped) return;
    this.lost =
      `the offset store lost its data: ${what}; groups committed before read as never committed. ` +
      'Restore the store (or import an export), then restart the proxy (docs/stores.md)';
    this.opts.log.error('offset store lost its data', { store: this.opts.store.kind, reason: what });
    this.opts.onLost?.(what);
  }
}
