// No hand-written module over 700 lines (issue 41): product code, tests, the test bed and its Java
// programs, benchmarks and scripts alike. A module that grows past the bound is split along its
// seams before it becomes a second home for another job. Generated code (protocol/messages/) is
// exempt: its size follows the Kafka specs, not anyone's choice.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const MAX_LINES = 700;
/** Source files by their ending: every language the repository is written in. */
const SOURCE = /\.(?:[cm]?[jt]s|c|h|java|py|sh)$/;
const GENERATED = /^protocol\/messages\//;

/** `file: N lines` for each hand-written source file over `max` lines. */
function oversized(files: readonly string[], lineCount: (file: string) => number, max: number): string[] {
  return files
    .filter((f) => SOURCE.test(f) && !GENERATED.test(f))
    .map((f) => [f, lineCount(f)] as const)
    .filter(([, n]) => n > max)
    .map(([f, n]) => `${f}: ${n} lines`);
}

/** Lines as an editor counts them: `wc -l`, plus a last line without its newline. */
const linesOf = (text: string): number =>
  (text.match(/\n/g) ?? []).length + (text === '' || text.endsWith('\n') ? 0 : 1);

describe('module size', () => {
  test.each([
    { file: 'proxy/core/big.ts', lines: 701, flagged: true },
    { file: 'proxy/core/at-bound.ts', lines: 700, flagged: false },
    { file: 'test/reliability/run.ts', lines: 1278, flagged: true },
    { file: 'proxy/core/connection-flow.test.ts', lines: 715, flagged: true },
    { file: 'test/bed/java/Driver.java', lines: 703, flagged: true },
    { file: 'proxy/core/native/relay.c', lines: 900, flagged: true },
    { file: 'scripts/build.mjs', lines: 800, flagged: true },
    { file: 'protocol/messages/fetch-response.ts', lines: 2000, flagged: false },
    { file: 'docs/design.md', lines: 900, flagged: false },
    { file: 'deploy/kubernetes/kafka-offset-proxy.yaml', lines: 1200, flagged: false },
  ])('$file of $lines lines: flagged $flagged', ({ file, lines, flagged }) => {
    expect(oversized([file], () => lines, MAX_LINES)).toEqual(flagged ? [`${file}: ${lines} lines`] : []);
  });

  test('lines are counted as an editor counts them', () => {
    expect(linesOf('')).toBe(0);
    expect(linesOf('a\n')).toBe(1);
    expect(linesOf('a\nb')).toBe(2);
    expect(linesOf('a\nb\n')).toBe(2);
  });

  test(`no hand-written module of the repository is over ${MAX_LINES} lines`, () => {
    // Tracked files and new ones not yet added, so a file over the bound fails before its commit.
    const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], {
      cwd: REPO,
      encoding: 'utf8',
    })
      .split('\n')
      .filter((f) => f !== '' && fs.existsSync(path.join(REPO, f)));
    expect(files.filter((f) => SOURCE.test(f)).length).toBeGreaterThan(100);
    const read = (f: string): number => linesOf(fs.readFileSync(path.join(REPO, f), 'utf8'));
    expect(oversized(files, read, MAX_LINES)).toEqual([]);
  });
});
