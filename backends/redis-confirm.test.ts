import { ReplyError } from 'ioredis';
import { describe, expect, it } from 'vitest';
import {
  appendConfirmations,
  confirmationProblem,
  confirmationShortfall,
  confirmsAnything,
} from './redis-confirm.js';
import type { Confirmations, ConfirmingPipeline } from './redis-confirm.js';
import { parseRedisUrl } from './redis-url.js';

const none: Confirmations = { wait: 0, waitAofLocal: 0, waitAofReplicas: 0, waitTimeoutMs: 500 };

class Recording implements ConfirmingPipeline<Recording> {
  readonly calls: (string | number)[][] = [];
  wait(replicas: number, timeoutMs: number): Recording {
    this.calls.push(['WAIT', replicas, timeoutMs]);
    return this;
  }
  call(command: string, ...args: (string | number)[]): Recording {
    this.calls.push([command, ...args]);
    return this;
  }
}

describe('what a Redis commit waits for before it is acknowledged', () => {
  it('reads wait, waitAofLocal and waitAofReplicas from the store URL', () => {
    expect(parseRedisUrl('redis://h:1?waitAofLocal=1&waitAofReplicas=2&waitTimeoutMs=300')).toMatchObject({
      wait: 0,
      waitAofLocal: 1,
      waitAofReplicas: 2,
      waitTimeoutMs: 300,
    });
    expect(parseRedisUrl('redis://h:1')).toMatchObject({ wait: 0, waitAofLocal: 0, waitAofReplicas: 0 });
    expect(() => parseRedisUrl('redis://h:1?waitAofLocal=2')).toThrow(/waitAofLocal is 0 or 1/);
    expect(() => parseRedisUrl('redis://h:1?waitAofReplicas=-1')).toThrow(
      /waitAofReplicas must be an integer/,
    );
  });

  it('appends WAIT, WAITAOF or both, in that order, and nothing without them', () => {
    const cases: [Partial<Confirmations>, (string | number)[][]][] = [
      [{}, []],
      [{ wait: 1 }, [['WAIT', 1, 500]]],
      [{ waitAofLocal: 1 }, [['WAITAOF', 1, 0, 500]]],
      [{ waitAofReplicas: 2 }, [['WAITAOF', 0, 2, 500]]],
      [
        { wait: 1, waitAofLocal: 1, waitAofReplicas: 1 },
        [
          ['WAIT', 1, 500],
          ['WAITAOF', 1, 1, 500],
        ],
      ],
    ];
    for (const [given, calls] of cases) {
      const c = { ...none, ...given };
      const p = appendConfirmations(new Recording(), c);
      expect(p.calls).toEqual(calls);
      expect(confirmsAnything(c)).toBe(calls.length > 0);
    }
  });

  it('names every shortfall, and none when each is met', () => {
    const c = { ...none, wait: 1, waitAofLocal: 1, waitAofReplicas: 2 };
    expect(
      confirmationShortfall(
        [
          [null, 1],
          [null, [1, 2]],
        ],
        c,
      ),
    ).toBeNull();
    expect(
      confirmationShortfall(
        [
          [null, 3],
          [null, [1, 5]],
        ],
        c,
      ),
    ).toBeNull();
    expect(
      confirmationShortfall(
        [
          [null, 0],
          [null, [0, 1]],
        ],
        c,
      ),
    ).toBe(
      "reached 0 of 1 replicas and was not fsynced to the primary's append-only file and was fsynced to the append-only files of 1 of 2 replicas within 500 ms",
    );
    expect(confirmationShortfall([[null, [1, 0]]], { ...none, waitAofReplicas: 1 })).toBe(
      'was fsynced to the append-only files of 0 of 1 replicas within 500 ms',
    );
  });

  it("throws the server's error reply (a server without WAITAOF)", () => {
    const unknown = new ReplyError("ERR unknown command 'WAITAOF', with args beginning with: '1' '0' '500' ");
    expect(() => confirmationShortfall([[unknown, null]], { ...none, waitAofLocal: 1 })).toThrow(unknown);
  });

  it('refuses at start a server without WAITAOF, or without the append-only file for waitAofLocal', async () => {
    const server =
      (commandInfo: unknown[], aof: 0 | 1) =>
      async (command: string, ...args: string[]): Promise<unknown> => {
        if (command === 'COMMAND') return commandInfo;
        if (args[0] === 'server') return '# Server\r\nredis_version:7.0.15\r\n';
        return `# Persistence\r\naof_enabled:${aof}\r\n`;
      };
    const old = server([null], 1);
    const modern = server([['waitaof', 4]], 0);
    expect(await confirmationProblem(old, none, 'h:1')).toBeNull();
    expect(await confirmationProblem(old, { ...none, waitAofReplicas: 1 }, 'h:1')).toBe(
      "waitAofLocal and waitAofReplicas need WAITAOF (Redis 7.2+ or Valkey); h:1 runs Redis 7.0.15: use wait= for replicas, appendfsync always for the primary's disk",
    );
    expect(await confirmationProblem(modern, { ...none, waitAofReplicas: 1 }, 'h:1')).toBeNull();
    expect(await confirmationProblem(modern, { ...none, waitAofLocal: 1 }, 'h:1')).toBe(
      'waitAofLocal=1 needs the append-only file on h:1 (appendonly yes); it is off',
    );
  });
});
