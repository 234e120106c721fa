import { describe, expect, it } from 'vitest';
import { Progress } from './progress.js';

function fakeStream(isTTY: boolean) {
  const writes: string[] = [];
  return { isTTY, writes, write: (t: string) => writes.push(t) };
}

describe('Progress', () => {
  it('says nothing during the first second', () => {
    let now = 0;
    const stream = fakeStream(true);
    const p = new Progress('groups exported', stream, () => now);
    now = 999;
    p.update(5, 10);
    p.end();
    expect(stream.writes).toEqual([]);
  });

  it('on a terminal: a bar redrawn in place, cleared at the end', () => {
    let now = 0;
    const stream = fakeStream(true);
    const p = new Progress('groups exported', stream, () => now);
    now = 1500;
    p.update(3, 10);
    now = 1550; // too soon for a redraw
    p.update(4, 10);
    now = 1700;
    p.update(10, 10);
    p.end();
    expect(stream.writes).toEqual([
      `\r[${'#'.repeat(9)}${' '.repeat(21)}] 3/10 groups exported (30%)\x1b[K`,
      `\r[${'#'.repeat(30)}] 10/10 groups exported (100%)\x1b[K`,
      '\r\x1b[K',
    ]);
  });

  it('elsewhere (a pipe, a log file): a line with the counts every 2 s, and the last one', () => {
    let now = 0;
    const stream = fakeStream(false);
    const p = new Progress('offsets imported', stream, () => now);
    for (now = 1000; now <= 6000; now += 500) p.update(now, 200_000);
    p.update(200_000, 200_000);
    p.end();
    expect(stream.writes).toEqual([
      '1000/200000 offsets imported (0%)\n',
      '3000/200000 offsets imported (1%)\n',
      '5000/200000 offsets imported (2%)\n',
      '200000/200000 offsets imported (100%)\n',
    ]);
  });
});
