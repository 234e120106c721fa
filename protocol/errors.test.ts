import { describe, expect, it } from 'vitest';
import { ProtocolError, annotateProtocolError } from './errors.js';

// The API tag is kept by a flag, not found by reading the message: a message that itself begins
// with "[api " (a decoder's words, or a value quoted from the wire) is still tagged once.
describe('annotateProtocolError', () => {
  const cases: {
    title: string;
    make: () => unknown;
    expected: { message: string; code: string; apiKey: number; apiVersion: number };
  }[] = [
    {
      title: 'a ProtocolError without an API: tagged with this one',
      make: () => new ProtocolError('TRUNCATED', 'ends inside a field', 3),
      expected: { message: '[api 8 v9] ends inside a field', code: 'TRUNCATED', apiKey: 8, apiVersion: 9 },
    },
    {
      title: 'a message that starts like a tag: still tagged',
      make: () => new ProtocolError('BAD_LENGTH', '[api here] said by the decoder', 3),
      expected: {
        message: '[api 8 v9] [api here] said by the decoder',
        code: 'BAD_LENGTH',
        apiKey: 8,
        apiVersion: 9,
      },
    },
    {
      title: 'already tagged by an inner decoder: left as it is',
      make: () => new ProtocolError('TRUNCATED', 'inner', 0).withApi(1, 17),
      expected: { message: '[api 1 v17] inner', code: 'TRUNCATED', apiKey: 1, apiVersion: 17 },
    },
    {
      title: 'fields set by the constructor are kept; the message names the API once',
      make: () => new ProtocolError('WRONG_API', 'not a Fetch', 0, 1, 4),
      expected: { message: '[api 8 v9] not a Fetch', code: 'WRONG_API', apiKey: 1, apiVersion: 4 },
    },
    {
      title: 'any other error: DECODE_FAILED, tagged',
      make: () => new RangeError('[api x] out of range'),
      expected: {
        message: '[api 8 v9] [api x] out of range',
        code: 'DECODE_FAILED',
        apiKey: 8,
        apiVersion: 9,
      },
    },
  ];
  for (const c of cases) {
    it(c.title, () => {
      const original = c.make();
      const once = annotateProtocolError(original, 8, 9);
      const twice = annotateProtocolError(once, 2, 3);
      expect(twice).toBe(once);
      expect({
        message: twice.message,
        code: twice.code,
        apiKey: twice.apiKey,
        apiVersion: twice.apiVersion,
      }).toEqual(c.expected);
      if (!(original instanceof ProtocolError)) expect(twice.cause).toBe(original);
    });
  }
});
