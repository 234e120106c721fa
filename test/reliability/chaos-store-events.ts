/**
 * What the store did on its own during a chaos run, watched from outside the proxy: Sentinel's
 * master events (its pub/sub channels `+sdown`, `+odown`, `+try-failover`, `+switch-master`, ...).
 * A failover Sentinel decides by itself (a master it found down after the faults' overlap, or
 * one a long fsync kept from answering its pings within down-after) moves the master as an
 * injected failover does; the run logs every such event, and the checker counts each switch as a
 * store fault (kind 'sentinel-failover', a row of the fault table) from the first sign of it to
 * the switch, so a proxy's 503 while Sentinel had no master is explained and named as such. So is
 * a demotion ('sentinel-demotion'): Sentinel turns a server that came back still calling itself
 * master into a replica and disconnects its clients (REPLICAOF with CLIENT KILL TYPE normal, so
 * they ask the sentinels again), seconds after the switch: a client still on it loses its
 * connection then, and its commands in flight.
 */
import { Redis } from 'ioredis';
import type { FaultRecord } from './chaos-faults.js';

export interface StoreEvent {
  /** On the run's clock (s). */
  atS: number;
  channel: string;
  message: string;
}

/** The channels that concern the master (a replica's or a sentinel's +sdown is noise here). */
const MASTER_CHANNELS = new Set([
  '+sdown',
  '-sdown',
  '+odown',
  '-odown',
  '+try-failover',
  '+elected-leader',
  '+failover-state-select-slave',
  '+selected-slave',
  '+promoted-slave',
  '+failover-end',
  '+failover-end-for-timeout',
  '-failover-abort-not-elected',
  '-failover-abort-no-good-slave',
  '+switch-master',
  '+convert-to-slave',
]);

/** Events that start a failover episode: the master seen down, or a failover begun. */
const EPISODE_START = new Set(['+sdown', '+odown', '+try-failover', '+elected-leader']);

export class SentinelEvents {
  readonly events: StoreEvent[] = [];

  private constructor(private readonly client: Redis) {}

  /**
   * Subscribes to every channel of the sentinel at `port` (the run never faults the sentinels)
   * and records the master's events on `clock`, each logged as it comes.
   */
  static async watch(
    port: number,
    clock: () => number,
    log: (line: string) => void,
  ): Promise<SentinelEvents> {
    const client = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: null });
    const watch = new SentinelEvents(client);
    client.on('error', () => {
      // Reconnects by itself; a sentinel is never a fault's target.
    });
    client.on('pmessage', (_pattern: string, channel: string, message: string) => {
      if (!MASTER_CHANNELS.has(channel)) return;
      if ((channel === '+sdown' || channel === '-sdown') && !message.startsWith('master ')) return;
      const event = { atS: clock(), channel, message };
      watch.events.push(event);
      log(`${event.atS.toFixed(1)} s: sentinel :${port} ${channel} ${message}`);
    });
    await client.connect();
    await client.psubscribe('*');
    return watch;
  }

  close(): void {
    this.client.disconnect();
  }
}

/**
 * Each master switch as a fault record, from the first sign of its episode (the master seen down,
 * a failover tried: after the previous switch) to `+switch-master`, and each demotion
 * (`+convert-to-slave`) at its moment; numbered from `firstId`.
 */
export function sentinelFaults(events: readonly StoreEvent[], firstId: number): FaultRecord[] {
  const out: FaultRecord[] = [];
  let episode: StoreEvent[] = [];
  for (const e of events) {
    if (e.channel === '+convert-to-slave') {
      const who = /^slave (\S+)/.exec(e.message)?.[1] ?? e.message;
      out.push({
        id: firstId + out.length,
        kind: 'sentinel-demotion',
        target: 0,
        atS: e.atS,
        durationS: 0,
        startedS: e.atS,
        endedS: e.atS,
        note: `not injected: Sentinel made ${who} a replica and disconnected its clients`,
      });
      continue;
    }
    if (e.channel !== '+switch-master') {
      if (episode.length > 0 || EPISODE_START.has(e.channel)) episode.push(e);
      continue;
    }
    const startedS = episode[0]?.atS ?? e.atS;
    const to = /^\S+ \S+ \S+ (\S+) (\d+)$/.exec(e.message);
    const steps = [...new Set(episode.map((x) => x.channel))].join(', ');
    out.push({
      id: firstId + out.length,
      kind: 'sentinel-failover',
      target: 0,
      atS: startedS,
      durationS: 0,
      startedS,
      endedS: e.atS,
      note: `not injected: Sentinel switched the master to ${to ? `${to[1]}:${to[2]}` : e.message}${steps ? ` (after ${steps})` : ''}`,
    });
    episode = [];
  }
  return out;
}
