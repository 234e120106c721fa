import { describe, expect, it } from 'vitest';
import { MessageEmitter } from './emit-message.js';
import { SpecError, parseMessageSpec, parseVersions, stripComments } from './spec-model.js';

const base = {
  apiKey: 99,
  type: 'request',
  name: 'TestRequest',
  validVersions: '0-3',
  flexibleVersions: '2+',
};
const spec = (fields: unknown[], extra: Record<string, unknown> = {}): string =>
  `// comment\n${JSON.stringify({ ...base, ...extra, fields })}`;
const parse = (text: string): ReturnType<typeof parseMessageSpec> => parseMessageSpec(text, 'Test.json');

describe('spec parsing fails loudly on anything it does not understand', () => {
  it('accepts a well-formed spec', () => {
    const m = parse(spec([{ name: 'A', type: 'int32', versions: '0+', about: 'x // not a comment' }]));
    expect(m.root.fields[0]!.about).toBe('x // not a comment');
    expect(() => new MessageEmitter(m).emit()).not.toThrow();
  });

  it.each([
    ['an unknown message key', spec([], { newKey: 1 })],
    ['an unknown field key', spec([{ name: 'A', type: 'int32', versions: '0+', sorted: true }])],
    ['an unknown type', spec([{ name: 'A', type: 'int128', versions: '0+' }])],
    ['an unknown struct reference', spec([{ name: 'A', type: '[]Missing', versions: '0+' }])],
    ['a bad version range', spec([{ name: 'A', type: 'int32', versions: '3-1' }])],
    ['a nullable int', spec([{ name: 'A', type: 'int32', versions: '0+', nullableVersions: '0+' }])],
    ['a tag without taggedVersions', spec([{ name: 'A', type: 'int32', versions: '2+', tag: 0 }])],
    [
      'a tagged field outside flexible versions',
      spec([{ name: 'A', type: 'int32', versions: '0+', taggedVersions: '0+', tag: 0 }]),
    ],
    ['a default out of range', spec([{ name: 'A', type: 'int8', versions: '0+', default: '300' }])],
    [
      'a null default on a non-nullable field',
      spec([{ name: 'A', type: 'string', versions: '0+', default: 'null' }]),
    ],
    ['fields on a primitive', spec([{ name: 'A', type: 'int32', versions: '0+', fields: [] }])],
    ['an unknown message type', spec([], { type: 'event' })],
  ])('rejects %s', (_what, text) => {
    expect(() => parse(text)).toThrow(SpecError);
  });

  it('parses version ranges', () => {
    expect(parseVersions('3+', 'x')).toEqual({ min: 3, max: 0x7fff });
    expect(parseVersions('1-4', 'x')).toEqual({ min: 1, max: 4 });
    expect(parseVersions('2', 'x')).toEqual({ min: 2, max: 2 });
    expect(parseVersions('none', 'x').min).toBeGreaterThan(parseVersions('none', 'x').max);
  });

  it('strips comments but not comment-like text inside strings', () => {
    expect(JSON.parse(stripComments('{ "a": "b//c" } // tail\n'))).toEqual({ a: 'b//c' });
  });
});
