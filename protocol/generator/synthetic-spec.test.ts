// Generator features that no current Kafka spec exercises (uint32, field-level flexibleVersions,
// hex and float defaults, a nullable struct next to a tagged struct and a common struct): a
// synthetic spec is generated, loaded, and round-tripped with spec-built random messages.
import fc from 'fast-check';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { Reader } from '../reader.js';
import { messageArbitrary, versionsOf } from '../testing/arbitraries.js';
import { Writer } from '../writer.js';
import { MessageEmitter } from './emit-message.js';
import { PROTOCOL_DIR } from './main.js';
import { parseMessageSpec } from './spec-model.js';

const SPEC = `// synthetic
{
  "apiKey": 900, "type": "response", "name": "SyntheticResponse",
  "validVersions": "0-4", "flexibleVersions": "2+", "latestVersionUnstable": true, "deprecatedVersions": "0",
  "fields": [
    { "name": "Counter", "type": "uint32", "versions": "0+", "default": "0xfffffffe" },
    { "name": "Ratio", "type": "float64", "versions": "1+", "default": "1.5", "ignorable": true },
    { "name": "Label", "type": "string", "versions": "0+", "flexibleVersions": "none", "nullableVersions": "1+" },
    { "name": "Opt", "type": "Pair", "versions": "1+", "nullableVersions": "1+", "default": "null" },
    { "name": "Extra", "type": "Pair", "versions": "3+", "taggedVersions": "3+", "tag": 2 },
    { "name": "Ids", "type": "[]int32", "versions": "0+", "nullableVersions": "4+" },
    { "name": "Blob", "type": "bytes", "versions": "0+", "zeroCopy": true },
    { "name": "Big", "type": "int64", "versions": "2+", "taggedVersions": "2+", "tag": 0, "default": "-1" }
  ],
  "commonStructs": [
    { "name": "Pair", "versions": "0+", "fields": [
      { "name": "Key", "type": "uuid", "versions": "0+" },
      { "name": "Value", "type": "int16", "versions": "0+", "default": "-1" }
    ]}
  ]
}`;

describe('generator on a synthetic spec', () => {
  const dir = mkdtempSync(join(tmpdir(), 'codec-synthetic-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const spec = parseMessageSpec(SPEC, 'SyntheticResponse.json');

  it('round-trips every version', async () => {
    // Point the generated module's relative imports at the real codec core.
    const code = new MessageEmitter(spec)
      .emit()
      .replace(
        /from '\.\.\/([a-z-]+)\.js'/g,
        (_m, f: string) => `from '${pathToFileURL(join(PROTOCOL_DIR, `${f}.ts`)).href}'`,
      );
    const file = join(dir, 'synthetic-response.ts');
    writeFileSync(file, code);
    type Codec = {
      decodeSyntheticResponse(r: Reader, v: number): unknown;
      encodeSyntheticResponse(w: Writer, m: unknown, v: number): void;
      sizeOfSyntheticResponse(m: unknown, v: number): number;
      defaultSyntheticResponse(): Record<string, unknown>;
    };
    const mod = (await import(pathToFileURL(file).href)) as Codec;
    expect(mod.defaultSyntheticResponse()).toMatchObject({
      counter: 0xfffffffe,
      ratio: 1.5,
      opt: null,
      big: -1n,
    });
    for (const v of versionsOf(spec)) {
      fc.assert(
        fc.property(messageArbitrary(spec, v), (m) => {
          const w = new Writer();
          mod.encodeSyntheticResponse(w, m, v);
          const bytes = w.toBuffer();
          expect(mod.sizeOfSyntheticResponse(m, v)).toBe(bytes.length);
          expect(mod.decodeSyntheticResponse(new Reader(bytes), v)).toEqual(m);
        }),
        { numRuns: 50, seed: v },
      );
    }
    // Label keeps an int16 length even in flexible versions (field-level flexibleVersions "none").
    const m = { ...mod.defaultSyntheticResponse(), label: 'ab' };
    const w = new Writer();
    mod.encodeSyntheticResponse(w, m, 2);
    expect(w.toBuffer().subarray(12, 16).toString('hex')).toBe('00026162'); // after counter (4) and ratio (8)
    // A non-default value for a field the version cannot carry is refused unless ignorable.
    expect(() =>
      mod.encodeSyntheticResponse(new Writer(), { ...mod.defaultSyntheticResponse(), ratio: 2 }, 0),
    ).not.toThrow();
    expect(() =>
      mod.encodeSyntheticResponse(
        new Writer(),
        { ...mod.defaultSyntheticResponse(), opt: { key: 'AAAAAAAAAAAAAAAAAAAAAA', value: 1 } },
        0,
      ),
    ).toThrow(/cannot carry/);
  });
});
