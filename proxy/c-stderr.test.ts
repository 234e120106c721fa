// What C code prints to the C library's stderr stream (LMDB's "Write error: ...", without a
// newline; Node's fatal errors) becomes one JSON line of the log per write, on fd 2 at once
// (native/c-stderr.c through routeCStderrToLog). In a child process: the stream is process-wide.
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { loadTestingRelay, testingRelayFile } from '../test/harness/native-testing-addon.js';
import { routeCStderrToLog } from './console-to-log.js';

describe('routeCStderrToLog', () => {
  it("makes each write to C's stderr one JSON log line, escaped, split when long, none lost", () => {
    loadTestingRelay(); // built if missing or stale
    let fields = '';
    expect(routeCStderrToLog({ routeCStderr: (f) => ((fields = f), true) }, 'svc')).toBe(true);
    expect(routeCStderrToLog(null, 'svc')).toBe(false);
    const texts = [
      'Write error: No space left on device position 4096, size 8192',
      'two\nlines, "quoted" \\ and a tab\t\n',
      'x'.repeat(9000),
    ];
    const script = `
      const b = require(process.argv[1]);
      if (!b.routeCStderr(process.argv[2])) process.exit(3);
      for (const t of JSON.parse(process.argv[3])) b.printToCStderr(t);
      process.stdout.write('done');`;
    const child = spawnSync(
      process.execPath,
      ['-e', script, testingRelayFile(), fields, JSON.stringify(texts)],
      { encoding: 'utf8', timeout: 60_000 },
    );
    expect(child.status, child.stderr).toBe(0);
    expect(child.stdout).toBe('done');
    const lines = child.stderr.split('\n');
    expect(lines.pop()).toBe(''); // every line ends
    const parsed = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    for (const p of parsed) {
      expect(p).toMatchObject({
        level: 'error',
        event: 'library output',
        service: 'svc',
        component: 'library',
        source: 'C stderr',
      });
      expect(String(p['time'])).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    }
    expect(parsed[0]!['text']).toBe(texts[0]);
    expect(parsed[1]!['text']).toBe('two\nlines, "quoted" \\ and a tab\t');
    // The long one in several lines, together the whole text (the addon takes 8 KiB of it).
    expect(parsed.length).toBeGreaterThan(3);
    expect(
      parsed
        .slice(2)
        .map((p) => p['text'])
        .join(''),
    ).toBe('x'.repeat(8191));
  });
});
