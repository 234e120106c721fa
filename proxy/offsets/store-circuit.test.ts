import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { StoreUnavailableError } from '../../backends/errors.js';
import { MemoryStore } from '../../backends/memory-store.js';
import type { CommitRequest } from '../../backends/store.js';
import { createLogger } from '../logger.js';
import { storeFailureCode } from './kafka-errors.js';
import {
  FLAP_WINDOW_MS,
  MAX_HOLD_MS,
  PROBE_INTERVAL_MS,
  PROBE_LEASE,
  StoreCircuit,
  storeReadiness,
  WRITE_FAILURE_MEMORY_MS,
} from './store-circuit.js';

/** A memory store whose reads, writes, or both can fail, counting the calls that reached it. */
class FailingStore extends MemoryStore {
  reads: string | null = null;
  writes: string | null = null;
  /** While set, pings and leases (the probe) are not answered until it resolves. */
  stall: Promise<void> | null = null;
  calls = 0;
  pings = 0;
  leaseCalls = 0;
  override async ping(): Promise<void> {
    this.calls++;
    this.pings++;
    if (this.stall !== null) await this.stall;
    if (this.reads !== null) throw new StoreUnavailableError(this.reads);
  }
  override async fetch(...args: Parameters<MemoryStore['fetch']>) {
    this.calls++;
    if (this.reads !== null) throw new StoreUnavailableError(this.reads);
    return super.fetch(...args);
  }
  override async commit(request: CommitRequest) {
    this.calls++;
    if (this.reads !== null || this.writes !== null)
      throw new StoreUnavailableError(this.reads ?? this.writes!, { timedOut: this.reads !== null });
    return super.commit(request);
  }
  override async lease(name: string, holder: string, ttlMs: number) {
    this.calls++;
    this.leaseCalls++;
    if (this.reads !== null || this.writes !== null)
      throw new StoreUnavailableError(this.reads ?? this.writes!);
    return super.lease(name, holder, ttlMs);
  }
}

const commit = (offset: bigint): CommitRequest => ({
  group: 'g',
  requestId: `r${offset}`,
  writes: [
    {
      topic: 't',
      partition: 0,
      offset,
      leaderEpoch: -1,
      metadata: '',
      commitTimestamp: 1n,
      expireTimestamp: -1n,
    },
  ],
});

function setup(probeIntervalMs = 1000) {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger('debug', {}, (l) => lines.push(JSON.parse(l) as Record<string, unknown>));
  const inner = new FailingStore();
  const changes: boolean[] = [];
  const circuit = new StoreCircuit(inner, {
    log,
    probeHolder: 'me',
    probeIntervalMs,
    onChange: (open) => changes.push(open),
  });
  return { inner, circuit, lines, changes, events: () => lines.map((l) => l['event']) };
}

describe('StoreCircuit', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('passes operations through while the store answers', async () => {
    const { inner, circuit } = setup();
    await expect(circuit.commit(commit(5n))).resolves.toEqual({ status: 'ok' });
    expect(await circuit.fetch('g', null)).toMatchObject([{ offset: 5n }]);
    expect(circuit.isOpen).toBe(false);
    expect(inner.calls).toBe(2);
  });

  it('after one failure refuses at once without reaching the store, until a probe reads and writes it', async () => {
    const { inner, circuit, changes, events, lines } = setup();
    inner.reads = 'redis store: commit: no answer within 2000 ms';
    // The failure that opens it keeps its own code (timed out: REQUEST_TIMED_OUT).
    const first = await circuit.commit(commit(1n)).catch((e: unknown) => e);
    expect(storeFailureCode(first)).toBe(7);
    expect(circuit.isOpen).toBe(true);
    expect(circuit.problem).toBe('redis store: commit: no answer within 2000 ms');
    const before = inner.calls;
    const refused = await circuit.commit(commit(2n)).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(StoreUnavailableError);
    expect((refused as Error).message).toBe(
      'memory store: commit: not tried, the store is failing: redis store: commit: no answer within 2000 ms',
    );
    // COORDINATOR_LOAD_IN_PROGRESS: retriable, and the client keeps its coordinator (and heartbeats).
    expect(storeFailureCode(refused)).toBe(14);
    await expect(circuit.fetch('g', null)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(inner.calls).toBe(before);

    // Probes (the first at once, then one a second) while the store is down keep it open.
    await vi.advanceTimersByTimeAsync(3500);
    expect(circuit.isOpen).toBe(true);
    expect(inner.calls - before).toBe(4);

    // Back: the next probe (a ping and the probe's lease) closes it.
    inner.reads = null;
    await vi.advanceTimersByTimeAsync(1000);
    expect(circuit.isOpen).toBe(false);
    expect(circuit.problem).toBeNull();
    await expect(circuit.commit(commit(3n))).resolves.toEqual({ status: 'ok' });
    expect(changes).toEqual([true, false]);
    expect(events()).toEqual([
      'offset store failing: offset requests answered at once',
      'offset store takes requests again',
    ]);
    expect(lines[0]).toMatchObject({ level: 'warn', error: 'redis store: commit: no answer within 2000 ms' });
    expect(lines[1]).toMatchObject({ level: 'info', failingMs: 4000 });
    // Nothing refused at once reached the store: offset 2 was never written.
    expect(await inner.fetch('g', null)).toMatchObject([{ offset: 3n }]);
  });

  it('a store that answers pings but refuses writes stays open, naming the write error', async () => {
    const { inner, circuit } = setup();
    inner.writes =
      'embedded store: commit: write transaction failed: MDB_MAP_FULL: Environment mapsize limit reached';
    await expect(circuit.commit(commit(1n))).rejects.toBeInstanceOf(StoreUnavailableError);
    inner.writes =
      'embedded store: lease: write transaction failed: MDB_MAP_FULL: Environment mapsize limit reached';
    await vi.advanceTimersByTimeAsync(2500);
    expect(circuit.isOpen).toBe(true);
    expect(circuit.problem).toContain('lease: write transaction failed: MDB_MAP_FULL');
    await expect(circuit.ping()).resolves.toBeUndefined();
    // Reads are served meanwhile (OffsetFetch on a full disk), writes are not tried.
    await expect(circuit.fetch('g', null)).resolves.toEqual([]);
    await expect(circuit.deleteGroup('g')).rejects.toThrow('not tried, the store is failing');
    inner.writes = null;
    await vi.advanceTimersByTimeAsync(1000);
    expect(circuit.isOpen).toBe(false);
    expect(await inner.lease(PROBE_LEASE, 'other', 1000)).toBe(false);
  });

  it('stays open a probe interval after a failed write, even when a small write would pass', async () => {
    // A nearly full disk: a commit fails, the probe's small lease would fit in freed pages.
    const { inner, circuit } = setup();
    inner.writes = 'embedded store: commit: write transaction failed: No space left on device';
    await expect(circuit.commit(commit(1n))).rejects.toBeInstanceOf(StoreUnavailableError);
    inner.writes = null;
    await vi.advanceTimersByTimeAsync(900);
    expect(circuit.problem).toContain('No space left on device');
    // Reads resumed after the immediate probe's ping; writes wait for the next probe.
    await expect(circuit.fetch('g', null)).resolves.toEqual([]);
    await expect(circuit.commit(commit(2n))).rejects.toThrow('not tried, the store is failing');
    await vi.advanceTimersByTimeAsync(200);
    expect(circuit.isOpen).toBe(false);
  });

  it('trip() opens it from outside (the health probe), and close stops probing', async () => {
    const { inner, circuit } = setup();
    circuit.trip('connection refused to r:6379');
    expect(circuit.problem).toBe('connection refused to r:6379');
    await expect(circuit.listGroups()).rejects.toThrow('connection refused to r:6379');
    await circuit.close();
    const calls = inner.calls;
    await vi.advanceTimersByTimeAsync(5000);
    expect(inner.calls).toBe(calls);
  });

  it('errors that are not unavailability (a corrupt record) leave it closed', async () => {
    const { inner, circuit } = setup();
    inner.fetch = () => Promise.reject(new Error('group "g": offset record is malformed'));
    await expect(circuit.fetch('g', null)).rejects.toThrow('malformed');
    expect(circuit.isOpen).toBe(false);
  });

  it('closes at the first probe that succeeds: a store back is served within one probe interval', async () => {
    const { inner, circuit, lines } = setup(PROBE_INTERVAL_MS);
    inner.reads = 'connection refused to r:6379';
    await expect(circuit.commit(commit(1n))).rejects.toBeInstanceOf(StoreUnavailableError);
    await vi.advanceTimersByTimeAsync(1234);
    expect(circuit.isOpen).toBe(true);
    // A probe every interval while the store refuses at once: at 0, 250, 500, 750 and 1000 ms.
    expect(inner.pings).toBe(5);
    inner.reads = null;
    await vi.advanceTimersByTimeAsync(PROBE_INTERVAL_MS);
    expect(circuit.isOpen).toBe(false);
    expect(lines.at(-1)).toMatchObject({ event: 'offset store takes requests again', failingMs: 1250 });
  });

  it('one trial at a time: a probe the store does not answer is not followed by another', async () => {
    const { inner, circuit } = setup(PROBE_INTERVAL_MS);
    inner.reads = 'redis store: commit: no answer within 1500 ms';
    await expect(circuit.commit(commit(1n))).rejects.toBeInstanceOf(StoreUnavailableError);
    let answer!: () => void;
    inner.stall = new Promise((r) => (answer = r));
    await vi.advanceTimersByTimeAsync(10_000);
    // The one ping sent at once waits (a frozen store); no second one piles up behind it.
    expect(inner.pings).toBe(1);
    const before = inner.calls;
    await expect(circuit.commit(commit(2n))).rejects.toThrow('not tried');
    expect(inner.calls).toBe(before);
    // The store thaws: the waiting ping is answered, the write trial follows after the interval.
    inner.reads = null;
    inner.stall = null;
    answer();
    await vi.advanceTimersByTimeAsync(PROBE_INTERVAL_MS);
    expect(circuit.isOpen).toBe(false);
    expect(inner.leaseCalls).toBe(1);
  });

  it('a timeout while the store answers other operations is slow, not down: the circuit stays closed', async () => {
    const { inner, circuit, changes } = setup(PROBE_INTERVAL_MS);
    // One operation (a SCAN of a large keyspace, a commit on a loaded machine) misses its deadline...
    inner.listGroups = () =>
      new Promise((_, reject) =>
        setTimeout(
          () =>
            reject(
              new StoreUnavailableError('redis store: listGroups: no answer within 1500 ms', {
                timedOut: true,
              }),
            ),
          1500,
        ),
      );
    const slow = circuit.listGroups().catch((e: unknown) => e);
    // ...while others sent after it are answered.
    await vi.advanceTimersByTimeAsync(500);
    await expect(circuit.commit(commit(1n))).resolves.toEqual({ status: 'ok' });
    await vi.advanceTimersByTimeAsync(1000);
    expect(await slow).toBeInstanceOf(StoreUnavailableError);
    expect(circuit.isOpen).toBe(false);
    await expect(circuit.commit(commit(2n))).resolves.toEqual({ status: 'ok' });

    // A ping that times out alone (a readiness poll) is left to the health watcher.
    inner.ping = () =>
      Promise.reject(new StoreUnavailableError('redis store: ping: no answer', { timedOut: true }));
    await expect(circuit.ping()).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(circuit.isOpen).toBe(false);

    // With nothing answered since it was sent, the same timeout opens it.
    const alone = circuit.listGroups().catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(1500);
    expect(await alone).toBeInstanceOf(StoreUnavailableError);
    expect(circuit.problem).toBe('redis store: listGroups: no answer within 1500 ms');
    expect(changes).toEqual([true]);
  });

  it('a connection failure opens it at once, even right after an answer', async () => {
    const { inner, circuit } = setup(PROBE_INTERVAL_MS);
    await expect(circuit.commit(commit(1n))).resolves.toEqual({ status: 'ok' });
    inner.writes = 'redis store: commit: connection to r:6379 was reset';
    await expect(circuit.commit(commit(2n))).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(circuit.problem).toBe('redis store: commit: connection to r:6379 was reset');
  });

  it('trip() from the health watcher: a timed-out ping does not open it when the store answered since', async () => {
    const { circuit } = setup(PROBE_INTERVAL_MS);
    const sentAt = Date.now();
    await vi.advanceTimersByTimeAsync(100);
    await circuit.fetch('g', null);
    expect(circuit.trip('redis store: ping: no answer within 1500 ms', { timedOutSentAt: sentAt })).toBe(
      false,
    );
    expect(circuit.isOpen).toBe(false);
    expect(circuit.trip('redis store: ping: no answer within 1500 ms', { timedOutSentAt: Date.now() })).toBe(
      true,
    );
  });

  it('without flapping: reopened soon after closing, it holds twice as long, up to a limit; then starts again', async () => {
    const { inner, circuit, lines } = setup(PROBE_INTERVAL_MS);
    const openFor: number[] = [];
    // A nearly full disk: every commit fails, the probe's small write passes.
    for (let i = 0; i < 8; i++) {
      inner.writes = 'embedded store: commit: write transaction failed: No space left on device';
      await expect(circuit.commit(commit(BigInt(i)))).rejects.toBeInstanceOf(StoreUnavailableError);
      inner.writes = null;
      await vi.advanceTimersByTimeAsync(MAX_HOLD_MS + PROBE_INTERVAL_MS);
      expect(circuit.isOpen).toBe(false);
      openFor.push(lines.at(-1)!['failingMs'] as number);
      // The next commit fails within the flap window (here: at once).
    }
    expect(openFor).toEqual([250, 500, 1000, 2000, 2000, 2000, 2000, 2000]);
    // Closed for the flap window: the next failure holds one interval again.
    await vi.advanceTimersByTimeAsync(FLAP_WINDOW_MS);
    inner.writes = 'embedded store: commit: write transaction failed: No space left on device';
    await expect(circuit.commit(commit(9n))).rejects.toBeInstanceOf(StoreUnavailableError);
    inner.writes = null;
    await vi.advanceTimersByTimeAsync(MAX_HOLD_MS);
    expect(lines.at(-1)).toMatchObject({ failingMs: 250 });
  });
});

describe('storeReadiness', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const timedOut = () =>
    new StoreUnavailableError('redis store: ping: no answer within 1500 ms', { timedOut: true });

  it('ready when the ping answers; not ready, with the reason, while the circuit is open', async () => {
    const { circuit } = setup(PROBE_INTERVAL_MS);
    await expect(storeReadiness(circuit, () => circuit.ping())).resolves.toBeUndefined();
    circuit.trip('connection refused to r:6379');
    await expect(storeReadiness(circuit, () => Promise.resolve())).rejects.toThrow(
      'connection refused to r:6379',
    );
  });

  it('not ready after a refused write while the write trial passes (a nearly full disk), until a write succeeds', async () => {
    const { inner, circuit } = setup(PROBE_INTERVAL_MS);
    const full = 'embedded store: commit: write transaction failed: No space left on device';
    // Commits fail; the probe's small lease passes (pages freed by earlier transactions).
    inner.writes = full;
    await expect(circuit.commit(commit(1n))).rejects.toBeInstanceOf(StoreUnavailableError);
    const leaseOk = vi.spyOn(inner, 'lease').mockResolvedValue(true);
    await vi.advanceTimersByTimeAsync(MAX_HOLD_MS + PROBE_INTERVAL_MS);
    expect(circuit.isOpen).toBe(false);
    await expect(storeReadiness(circuit, () => circuit.ping())).rejects.toThrow(/No space left on device/);
    // It wears off when nothing fails any more ...
    await vi.advanceTimersByTimeAsync(WRITE_FAILURE_MEMORY_MS);
    await expect(storeReadiness(circuit, () => circuit.ping())).resolves.toBeUndefined();
    // ... and ends at once when a write succeeds.
    await expect(circuit.commit(commit(2n))).rejects.toBeInstanceOf(StoreUnavailableError);
    await vi.advanceTimersByTimeAsync(MAX_HOLD_MS + PROBE_INTERVAL_MS);
    inner.writes = null;
    await circuit.commit(commit(3n));
    await expect(storeReadiness(circuit, () => circuit.ping())).resolves.toBeUndefined();
    leaseOk.mockRestore();
  });

  it('a write that times out is not a refused write when the store answered others meanwhile', async () => {
    const { inner, circuit } = setup(PROBE_INTERVAL_MS);
    const timedOutCommit = () =>
      new Promise<never>((_, reject) => {
        setTimeout(
          () =>
            reject(
              new StoreUnavailableError('zookeeper store: commit: no answer within 1500 ms', {
                timedOut: true,
              }),
            ),
          1500,
        );
      });
    const real = inner.commit.bind(inner);
    inner.commit = timedOutCommit;
    const late = circuit.commit(commit(1n)).catch((e: unknown) => e);
    // Others are answered while it waits: the store is slow, not refusing writes.
    inner.commit = real;
    await vi.advanceTimersByTimeAsync(500);
    await expect(circuit.lease('other', 'me', 1000)).resolves.toBe(true);
    await vi.advanceTimersByTimeAsync(1000);
    expect(await late).toBeInstanceOf(StoreUnavailableError);
    expect(circuit.recentWriteFailure).toBeNull();
    await expect(storeReadiness(circuit, () => circuit.ping())).resolves.toBeUndefined();
    // With nothing answered since it was sent, the same timeout is remembered.
    inner.commit = timedOutCommit;
    const alone = circuit.commit(commit(2n)).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(1500);
    expect(await alone).toBeInstanceOf(StoreUnavailableError);
    expect(circuit.recentWriteFailure).toMatch(
      /a write failed \d+ ms ago: zookeeper store: commit: no answer/,
    );
  });

  it('a ping that times out is ready when the store answered other operations meanwhile, not otherwise', async () => {
    const { circuit } = setup(PROBE_INTERVAL_MS);
    const slowPing = () =>
      new Promise<void>((_, reject) => {
        setTimeout(() => reject(timedOut()), 1500);
      });
    // Under load: commits answered while the ping waits.
    const busy = storeReadiness(circuit, slowPing);
    await vi.advanceTimersByTimeAsync(700);
    await circuit.commit(commit(1n));
    await vi.advanceTimersByTimeAsync(800);
    await expect(busy).resolves.toBeUndefined();
    // Nothing answered: not ready.
    const idle = storeReadiness(circuit, slowPing).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(1500);
    expect(await idle).toBeInstanceOf(StoreUnavailableError);
    // A ping refused (not a timeout) is not ready however recent the last answer.
    await circuit.commit(commit(2n));
    await expect(
      storeReadiness(circuit, () =>
        Promise.reject(new StoreUnavailableError('connection refused to r:6379')),
      ),
    ).rejects.toThrow('connection refused');
  });
});
