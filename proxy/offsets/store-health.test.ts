import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../backends/errors.js';
import { MemoryStore } from '../../backends/memory-store.js';
import { createLogger } from '../logger.js';
import { StoreHealth } from './store-health.js';

/** A memory store that can be "down": every operation then fails as a networked store's would. */
class SwitchableStore extends MemoryStore {
  down = false;
  problem: string | null = null;
  override async ping(): Promise<void> {
    if (this.down)
      throw new StoreUnavailableError('memory store: ping: Reached the max retries per request limit');
  }
  override async fetch(...args: Parameters<MemoryStore['fetch']>) {
    if (this.down)
      throw new StoreUnavailableError('memory store: fetch: Reached the max retries per request limit');
    return super.fetch(...args);
  }
  connectionProblem(): string | null {
    return this.down ? this.problem : null;
  }
}

function logged() {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger('debug', {}, (l) => lines.push(JSON.parse(l) as Record<string, unknown>));
  return { lines, log, events: () => lines.map((l) => l['event']) };
}

describe('StoreHealth', () => {
  it('logs open once, then one line when the store stops answering and one when it answers again', async () => {
    const inner = new SwitchableStore();
    const { log, lines, events } = logged();
    const health = new StoreHealth(inner, { target: 'r:6379', log, pingIntervalMs: 1_000_000 });
    await health.check();
    expect(health.up).toBe(true);
    inner.down = true;
    inner.problem = 'connection refused to r:6379';
    await expect(health.fetch('g', null)).rejects.toThrow(
      'memory store: fetch: connection refused to r:6379',
    );
    await health.check();
    await health.check();
    expect(health.up).toBe(false);
    expect(health.problem).toBe('connection refused to r:6379');
    inner.down = false;
    expect(await health.fetch('g', null)).toEqual([]);
    expect(health.up).toBe(true);
    expect(events()).toEqual([
      'offset store open',
      'offset store not answering',
      'offset store answers again',
    ]);
    expect(lines[1]).toMatchObject({
      store: 'memory',
      target: 'r:6379',
      error: 'connection refused to r:6379',
    });
    await health.close();
  });

  it('down at start says so, and never "open"', async () => {
    const inner = new SwitchableStore();
    inner.down = true;
    inner.problem = 'connection refused to r:6379';
    const { log, events } = logged();
    const health = new StoreHealth(inner, { target: 'r:6379', log, pingIntervalMs: 1_000_000 });
    await health.check();
    expect(events()).toEqual(['offset store not answering at start']);
    await health.close();
  });

  it('without a client report, a TCP probe of the endpoints says why', async () => {
    const inner = new SwitchableStore();
    inner.down = true;
    const closed = net.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', () => r()));
    const port = (closed.address() as net.AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const open = net.createServer((s) => s.on('error', () => undefined));
    await new Promise<void>((r) => open.listen(0, '127.0.0.1', () => r()));
    const openPort = (open.address() as net.AddressInfo).port;
    try {
      const { log, lines } = logged();
      const health = new StoreHealth(inner, {
        target: 'zk',
        endpoints: [
          { host: '127.0.0.1', port },
          { host: '127.0.0.1', port: openPort },
        ],
        log,
        pingIntervalMs: 1_000_000,
      });
      await health.check();
      expect(lines[0]!['error']).toBe(
        `connection refused to 127.0.0.1:${port}; 127.0.0.1:${openPort} accepts connections but does not answer`,
      );
      await health.close();
    } finally {
      open.close();
    }
  });

  it('probes where the store says its operations go (a Sentinel master), not the configured endpoints', async () => {
    const inner = new SwitchableStore();
    inner.down = true;
    const silent = net.createServer((s) => s.on('error', () => undefined));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
    const masterPort = (silent.address() as net.AddressInfo).port;
    let master: { host: string; port: number; role: string } | null = {
      host: '127.0.0.1',
      port: masterPort,
      role: 'the master mymaster',
    };
    Object.assign(inner, { probeEndpoints: () => (master === null ? null : [master]) });
    try {
      const { log, lines } = logged();
      const health = new StoreHealth(inner, {
        target: 'sentinels',
        // A sentinel that answers: probing it would blame it for the master's silence.
        endpoints: [{ host: '127.0.0.1', port: masterPort + 1 }],
        log,
        pingIntervalMs: 1_000_000,
      });
      await health.check();
      expect(lines[0]!['error']).toBe(
        `the master mymaster at 127.0.0.1:${masterPort} accepts connections but does not answer`,
      );
      // Not connected to any master: the configured endpoints again.
      master = null;
      inner.down = false;
      await health.check();
      inner.down = true;
      await health.check();
      expect(String(lines.at(-1)!['error'])).toContain(`127.0.0.1:${masterPort + 1}`);
      await health.close();
    } finally {
      silent.close();
    }
  });

  it('a timed-out operation names the target; other errors pass unchanged', async () => {
    const inner = new SwitchableStore();
    inner.fetch = () =>
      Promise.reject(new StoreUnavailableError('x store: fetch: no answer within 5 ms', { timedOut: true }));
    const { log } = logged();
    const health = new StoreHealth(inner, { target: 'h:1', log, pingIntervalMs: 1_000_000 });
    await expect(health.fetch('g', null)).rejects.toMatchObject({
      message: 'x store: fetch: no answer within 5 ms (store h:1)',
      timedOut: true,
    });
    inner.getGroup = () => Promise.reject(new TypeError('not a store failure'));
    await expect(health.getGroup('g')).rejects.toThrow(TypeError);
    await health.close();
  });

  it('an error it named the target in passes a second time unchanged, whatever its words', async () => {
    const inner = new SwitchableStore();
    const timedOut = new StoreUnavailableError('x store: fetch: no answer within 5 ms', { timedOut: true });
    inner.fetch = () => Promise.reject(timedOut);
    const { log } = logged();
    const first = new StoreHealth(inner, { target: 'h:1', log, pingIntervalMs: 1_000_000 });
    const second = new StoreHealth(first, { target: 'h:1', log, pingIntervalMs: 1_000_000 });
    await expect(second.fetch('g', null)).rejects.toMatchObject({
      message: 'x store: fetch: no answer within 5 ms (store h:1)',
    });
    await second.close();
    await first.close();
  });

  it("a reported problem is said under the store's name of the operation, whatever the error said", async () => {
    const inner = new SwitchableStore();
    inner.down = true;
    inner.problem = 'connection refused to r:6379';
    inner.deleteOffsets = () => Promise.reject(new StoreUnavailableError('memory store: not connected'));
    const { log } = logged();
    const health = new StoreHealth(inner, { target: 'r:6379', log, pingIntervalMs: 1_000_000 });
    await expect(health.deleteOffsets('g', [{ topic: 't', partition: 0 }])).rejects.toThrow(
      'memory store: deleteOffsets: connection refused to r:6379',
    );
    await health.close();
  });

  it('a ping that times out while other operations are answered is slow, not down', async () => {
    const inner = new SwitchableStore();
    const { log, events } = logged();
    const downs: string[] = [];
    const health = new StoreHealth(inner, {
      target: 'r:6379',
      log,
      pingIntervalMs: 1_000_000,
      onDown: (why) => downs.push(why),
    });
    await health.check();
    const timedOut = () =>
      new StoreUnavailableError('memory store: ping: no answer within 50 ms', { timedOut: true });
    // A loaded store: the ping misses its deadline, a fetch sent after it is answered meanwhile.
    inner.ping = () => new Promise((_, reject) => setTimeout(() => reject(timedOut()), 50));
    const checking = health.check();
    await new Promise((r) => setTimeout(r, 10));
    expect(await health.fetch('g', null)).toEqual([]);
    await checking;
    expect(health.up).toBe(true);
    expect(downs).toEqual([]);
    // Nothing answered while it waited, twice in a row: not answering.
    let pings = 0;
    inner.ping = () => {
      pings++;
      return pings === 1 ? Promise.reject(timedOut()) : Promise.resolve();
    };
    await health.check();
    expect(health.up).toBe(true);
    expect(pings).toBe(2);
    inner.ping = () => Promise.reject(timedOut());
    await health.check();
    expect(health.up).toBe(false);
    expect(downs).toEqual(['memory store: ping: no answer within 50 ms']);
    expect(events()).toEqual(['offset store open', 'offset store not answering']);
    await health.close();
  });
});
