// Truncated and mutated frames must fail cleanly (ProtocolError only). Sample frames are encoded
// from random spec-built messages for every API at its oldest, first flexible and newest version;
// golden frames recorded from real brokers (test/golden/) can be fed to the same checkRobustness.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { encodeRequestFrame, encodeResponseFrame } from './frames.js';
// Every codec, registered (codec-registry.ts): the frames below are of every API.
import './messages/index.js';
import { SPEC_DIR } from './generator/main.js';
import { hasCodec, loadSpecs } from './generator/spec-model.js';
import { messageArbitrary } from './testing/arbitraries.js';
import { checkRobustness, decodedWeight } from './testing/robustness.js';
import type { RobustnessFrame } from './testing/robustness.js';

const specs = loadSpecs(SPEC_DIR).filter(hasCodec);

function sampleFrames(): RobustnessFrame[] {
  const frames: RobustnessFrame[] = [];
  for (const spec of specs) {
    const { min, max } = spec.validVersions;
    const versions = new Set([min, max]);
    if (spec.flexibleVersions.min <= max) versions.add(Math.max(min, spec.flexibleVersions.min));
    for (const v of versions) {
      const [m] = fc.sample(messageArbitrary(spec, v, { maxArray: 2 }), {
        seed: 7 * v + spec.apiKey!,
        numRuns: 1,
      });
      const name = `${spec.name} v${v}`;
      if (spec.type === 'request') {
        const header = { apiKey: spec.apiKey!, apiVersion: v, correlationId: 1, clientId: 'robust' };
        frames.push({ name, kind: 'request', frame: encodeRequestFrame(header, m).subarray(4) });
      } else {
        frames.push({
          name,
          kind: 'response',
          apiKey: spec.apiKey!,
          apiVersion: v,
          frame: encodeResponseFrame(spec.apiKey!, v, 1, m).subarray(4),
        });
      }
    }
  }
  return frames;
}

describe('robustness of decoding against truncation and mutation', () => {
  const frames = sampleFrames();

  it('samples every API in both directions', () => {
    expect(new Set(frames.map((f) => f.name.split(' ')[0])).size).toBe(specs.length);
  });

  it('every truncated prefix throws ProtocolError; mutations decode or throw ProtocolError', () => {
    const failures = checkRobustness(frames, { mutations: 60, seed: 1234 });
    expect(failures.slice(0, 5)).toEqual([]);
  });

  it('reports a frame that does not decode at all', () => {
    // A frame whose api key is unknown still only raises ProtocolError, but a broken input list is reported.
    const bogus: RobustnessFrame = { name: 'bogus', kind: 'request', frame: Buffer.from('00', 'hex') };
    expect(checkRobustness([bogus], { mutations: 1 })).toHaveLength(1);
  });

  it('decodedWeight counts array elements, not buffer bytes', () => {
    expect(decodedWeight({ a: [1, 2, { s: [1, 2] }], b: Buffer.alloc(100) })).toBe(5);
  });
});
