// A negative size prefix is one fault wherever the proxy reads frames: the request splitter, the
// response reader and the streamed Fetch walker report it with the same code.
import { describe, expect, test } from 'vitest';
import { ProtocolError } from '../../protocol/errors.js';
import { FrameSplitter } from '../../protocol/frame-splitter.js';
import { FetchResponseStream } from './fetch-stream.js';
import { ResponseReader } from './response-reader.js';

function codeOf(run: () => unknown): unknown {
  try {
    run();
  } catch (err) {
    return err instanceof ProtocolError ? err.code : err;
  }
  return 'no error';
}

describe('a negative frame size', () => {
  for (const size of [-1, -5, -0x80000000]) {
    const prefix = Buffer.alloc(8);
    prefix.writeInt32BE(size, 0);

    test(`${size}: NEGATIVE_FRAME_SIZE in requests, responses and streamed Fetch responses`, () => {
      const splitter = new FrameSplitter({ maxFrameSize: 1 << 20 });
      const reader = new ResponseReader(1 << 20, {
        routeResponse: () => 'whole',
        streamResponse: () => undefined,
        wholeResponse: () => undefined,
      });
      expect(codeOf(() => splitter.push(prefix))).toBe('NEGATIVE_FRAME_SIZE');
      expect(codeOf(() => reader.push(prefix))).toBe('NEGATIVE_FRAME_SIZE');
      expect(codeOf(() => new FetchResponseStream(17).push(prefix))).toBe('NEGATIVE_FRAME_SIZE');
    });
  }
});
