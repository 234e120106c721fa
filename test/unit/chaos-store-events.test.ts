import { describe, expect, it } from 'vitest';
import { sentinelFaults } from '../reliability/chaos-store-events.js';

const e = (atS: number, channel: string, message = 'master kop 127.0.0.1 7001 #quorum 2/2') => ({
  atS,
  channel,
  message,
});

describe("the chaos run's record of Sentinel's own failovers", () => {
  it('spans each switch from the first sign of its episode to +switch-master', () => {
    const faults = sentinelFaults(
      [
        e(10, '+sdown'),
        e(10.5, '+odown'),
        e(11, '+try-failover'),
        e(13, '+switch-master', 'kop 127.0.0.1 7001 127.0.0.1 7002'),
        e(40, '+switch-master', 'kop 127.0.0.1 7002 127.0.0.1 7001'),
      ],
      5,
    );
    expect(faults.map((f) => [f.id, f.kind, f.startedS, f.endedS])).toEqual([
      [5, 'sentinel-failover', 10, 13],
      [6, 'sentinel-failover', 40, 40],
    ]);
    expect(faults[0]!.note).toBe(
      'not injected: Sentinel switched the master to 127.0.0.1:7002 (after +sdown, +odown, +try-failover)',
    );
  });

  it('records a demotion at its moment, apart from the episodes', () => {
    const faults = sentinelFaults(
      [
        e(10, '+sdown'),
        e(12, '+convert-to-slave', 'slave 127.0.0.1:7003 127.0.0.1 7003 @ kop 127.0.0.1 7001'),
        e(13, '+switch-master', 'kop 127.0.0.1 7001 127.0.0.1 7002'),
      ],
      1,
    );
    expect(faults.map((f) => [f.kind, f.startedS, f.endedS, f.note])).toEqual([
      [
        'sentinel-demotion',
        12,
        12,
        'not injected: Sentinel made 127.0.0.1:7003 a replica and disconnected its clients',
      ],
      [
        'sentinel-failover',
        10,
        13,
        'not injected: Sentinel switched the master to 127.0.0.1:7002 (after +sdown)',
      ],
    ]);
  });

  it('starts no episode on a master coming back, and records none without a switch', () => {
    expect(sentinelFaults([e(5, '-sdown'), e(6, '+sdown'), e(7, '-sdown')], 1)).toEqual([]);
    const [f] = sentinelFaults(
      [e(5, '-sdown'), e(20, '+try-failover'), e(22, '+switch-master', 'kop a 1 b 2')],
      1,
    );
    expect([f!.startedS, f!.endedS]).toEqual([20, 22]);
  });
});
