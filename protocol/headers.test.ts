import { describe, expect, it } from 'vitest';
import {
  decodeRequestHeader,
  decodeResponseHeader,
  encodeRequestHeader,
  encodeResponseHeader,
  requestHeaderVersion,
  responseHeaderVersion,
  sizeOfRequestHeader,
} from './headers.js';
import { Reader } from './reader.js';
import { Writer } from './writer.js';

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');

describe('header version selection', () => {
  it('uses response header v0 for ApiVersions even in flexible versions (v3+)', () => {
    for (let v = 0; v <= 4; v++) expect(responseHeaderVersion(18, v)).toBe(0);
    expect(requestHeaderVersion(18, 3)).toBe(2);
    expect(requestHeaderVersion(18, 2)).toBe(1);
  });

  it('follows the flexible versions of each API', () => {
    expect(requestHeaderVersion(3, 8)).toBe(1); // Metadata v9 is the first flexible version
    expect(requestHeaderVersion(3, 9)).toBe(2);
    expect(responseHeaderVersion(3, 8)).toBe(0);
    expect(responseHeaderVersion(3, 9)).toBe(1);
    expect(requestHeaderVersion(8, 8)).toBe(2); // OffsetCommit flexible from v8
    expect(responseHeaderVersion(8, 7)).toBe(0);
    expect(requestHeaderVersion(0, 9)).toBe(2); // Produce flexible from v9
  });

  it('uses request header v0 only for ControlledShutdown v0', () => {
    expect(requestHeaderVersion(7, 0)).toBe(0);
    expect(requestHeaderVersion(7, 1)).toBe(1);
  });
});

describe('header codecs against hand-built bytes', () => {
  it('request header v1 and v2 keep an int16-length client id', () => {
    const v1 = hex('0003 0004 0000002a 0003 616263');
    const h1 = decodeRequestHeader(new Reader(v1), 1);
    expect(h1).toEqual({ apiKey: 3, apiVersion: 4, correlationId: 42, clientId: 'abc' });
    // v2 adds a tagged-field section; one unknown tag (tag 5, 2 bytes) must survive a round trip.
    const v2 = hex('0012 0003 00000007 ffff 01 05 02 beef');
    const h2 = decodeRequestHeader(new Reader(v2), 2);
    expect(h2.clientId).toBeNull();
    expect(h2._unknownTaggedFields?.[0]?.tag).toBe(5);
    const w = new Writer();
    encodeRequestHeader(w, h2, 2);
    expect(w.toBuffer().equals(v2)).toBe(true);
    expect(sizeOfRequestHeader(h2, 2)).toBe(v2.length);
  });

  it('request header v0 has no client id', () => {
    const r = new Reader(hex('0007 0000 00000001'));
    expect(decodeRequestHeader(r, 0)).toEqual({ apiKey: 7, apiVersion: 0, correlationId: 1, clientId: null });
    expect(r.remaining).toBe(0);
  });

  it('response headers v0 and v1', () => {
    expect(decodeResponseHeader(new Reader(hex('00000009')), 0)).toEqual({ correlationId: 9 });
    const r = new Reader(hex('00000009 00'));
    expect(decodeResponseHeader(r, 1)).toEqual({ correlationId: 9 });
    expect(r.remaining).toBe(0);
    const w = new Writer();
    encodeResponseHeader(w, { correlationId: 9 }, 1);
    expect(w.toBuffer().toString('hex')).toBe('0000000900');
  });
});
