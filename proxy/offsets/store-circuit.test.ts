import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { StoreUnavailableError } from '../../backends/errors.js';
import { MemoryStore } from '../../backends/memory-store.js';
import type { CommitRequest } from '../../backends/store.js';
import { createLogger } from '../logger.js';
import { storeFailureCode } from './kafka-errors.js';
import { PROBE_LEASE, StoreCircuit } from './store-circuit.js';

/** A memory store whose reads, writes, or both can fail, counting the calls that reached it. */
class FailingStore extends MemoryStore {
  reads: string | null = null;
  writes: string | null = null;
  calls = 0;
  override async ping(): Promise<void> {
    this.calls++;
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

function setup() {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger('debug', {}, (l) => lines.push(JSON.parse(l) as Record<string, unknown>));
  const inner = new FailingStore();
  const changes: boolean[] = [];
  const circuit = new StoreCircuit(inner, {
    log,
    probeHolder: 'me',
    probeIntervalMs: 1000,
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
});
