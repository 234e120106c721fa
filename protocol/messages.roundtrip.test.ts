// Property tests: for every request/response spec and every version, random messages built from the
// spec model round-trip through the generated codec, and sizeOf matches the encoded length.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SPEC_DIR } from './generator/main.js';
import { hasCodec, loadSpecs } from './generator/spec-model.js';
import { apiCodecs } from './messages/index.js';
import { Reader } from './reader.js';
import { messageArbitrary, versionsOf } from './testing/arbitraries.js';
import { Writer } from './writer.js';

const specs = loadSpecs(SPEC_DIR).filter(hasCodec);
const NUM_RUNS = 12;

describe('generated codecs round-trip random messages of every version', () => {
  it('covers every api key in both directions', () => {
    expect(specs.length).toBe(apiCodecs.size * 2);
  });

  for (const spec of specs) {
    it(`${spec.name} v${spec.validVersions.min}-${spec.validVersions.max}`, () => {
      const codec = apiCodecs.get(spec.apiKey!)!;
      const [decode, encode, sizeOf] =
        spec.type === 'request'
          ? [codec.decodeRequest, codec.encodeRequest, codec.sizeOfRequest]
          : [codec.decodeResponse, codec.encodeResponse, codec.sizeOfResponse];
      for (const version of versionsOf(spec)) {
        fc.assert(
          fc.property(messageArbitrary(spec, version), (m) => {
            const w = new Writer(8);
            encode(w, m, version);
            const bytes = w.toBuffer();
            expect(sizeOf(m, version)).toBe(bytes.length);
            // Decode from the middle of a larger buffer: views must respect their bounds.
            const padded = Buffer.concat([Buffer.from([0xaa, 0xbb]), bytes, Buffer.from([0xcc])]);
            const r = new Reader(padded, 2, 2 + bytes.length);
            const decoded = decode(r, version);
            expect(r.remaining).toBe(0);
            expect(decoded).toEqual(m);
            const exact = Writer.exact(bytes.length);
            encode(exact, decoded, version);
            expect(exact.toBuffer().equals(bytes)).toBe(true);
          }),
          { numRuns: NUM_RUNS, seed: 42 + version },
        );
      }
    });
  }
});
