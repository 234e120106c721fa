// The generated codecs are committed; regenerating in memory must reproduce them exactly, so a
// changed spec or generator cannot ship without its output.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MESSAGES_DIR, generateAll } from './main.js';

describe('protocol/messages is up to date', () => {
  const generated = generateAll();

  it('has exactly the generated files', () => {
    const onDisk = readdirSync(MESSAGES_DIR)
      .filter((f) => f.endsWith('.ts'))
      .sort();
    expect(onDisk).toEqual([...generated.keys()].sort());
  });

  it('every file matches the generator output (run `npm run generate` if this fails)', () => {
    const stale = [...generated].filter(
      ([name, text]) => readFileSync(join(MESSAGES_DIR, name), 'utf8') !== text,
    );
    expect(stale.map(([name]) => name)).toEqual([]);
  });
});
