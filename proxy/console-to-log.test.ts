import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from './logger.js';
import { routeConsoleToLog } from './console-to-log.js';

const { error, warn } = console;

describe('routeConsoleToLog', () => {
  afterEach(() => {
    console.error = error;
    console.warn = warn;
  });

  it("turns a library's multi-line console.error of an Error into one JSON line", () => {
    const out: string[] = [];
    const log = createLogger('info', { service: 's' }, (l) => out.push(`${l}\n`));
    routeConsoleToLog(log.child({ component: 'library' }), { write: (s: string) => out.push(s) });
    // What lmdb-js prints (write.js) when a write transaction fails on a full disk.
    const err = new Error('MDB_PROBLEM: Unexpected problem - txn should abort');
    err.stack = `${err.message}\n    at lmdbError (/app/node_modules/lmdb/write.js:516:7)\n    at Function.<anonymous>`;
    console.error(err);
    console.warn('syncBatchThreshold is no longer supported');
    // A newline first ends LMDB's C fragment ("Write error: ... size 4096", no newline of its own).
    expect(out[0]).toBe('\n');
    const lines = out
      .slice(1)
      .join('')
      .split('\n')
      .filter((l) => l !== '');
    expect(lines).toHaveLength(2);
    const [first, second] = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(first).toMatchObject({
      level: 'error',
      event: 'library output',
      component: 'library',
      text: 'MDB_PROBLEM: Unexpected problem - txn should abort',
    });
    expect(String(first!['stack'])).toContain('lmdb/write.js:516:7');
    expect(second).toMatchObject({ level: 'warn', text: 'syncBatchThreshold is no longer supported' });
  });

  it("writes no newline first when C's stderr stream writes JSON lines already", () => {
    const out: string[] = [];
    const log = createLogger('info', { service: 's' }, (l) => out.push(`${l}\n`));
    routeConsoleToLog(log.child({ component: 'library' }), { write: (s: string) => out.push(s) }, true);
    console.error(new Error('MDB_PROBLEM: Unexpected problem - txn should abort'));
    expect(out).toHaveLength(1);
    expect(JSON.parse(out[0]!)).toMatchObject({ event: 'library output' });
  });
});
