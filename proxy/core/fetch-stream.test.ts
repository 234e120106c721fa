import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { ProtocolError } from '../../protocol/errors.js';
import { decodeResponseFrame, encodeRequestFrame, encodeResponseFrame } from '../../protocol/frames.js';
import { defaultFetchRequest } from '../../protocol/messages/fetch-request.js';
import { Reader } from '../../protocol/reader.js';
import type { TaggedField } from '../../protocol/reader.js';
import { ApiKey, getApiCodec } from '../../protocol/messages/index.js';
import {
  defaultFetchResponse,
  defaultFetchableTopicResponse,
} from '../../protocol/messages/fetch-response.js';
import type { FetchResponse, NodeEndpoint } from '../../protocol/messages/fetch-response.js';
import { ApiPlans } from './api-plan.js';
import { endpoint, partition, rich, topicId } from '../../test/harness/fetch-answers.js';
import type { HostPort } from './broker-map.js';
import { connectionBed } from '../../test/harness/connection-bed.js';
import type { ConnectionBed } from '../../test/harness/connection-bed.js';
import {
  FETCH_STREAM_VERSIONS,
  FetchResponseStream,
  PAD_TAG,
  encodeTaggedSection,
  rewriteFetchTail,
} from './fetch-stream.js';
import type { ExposeBrokerNow, ExposedBroker, TailOutcome } from './fetch-stream.js';

const exposeTo =
  (host: string, seen: number[] = []): ExposeBrokerNow =>
  (nodeId: number, _upstream: HostPort): ExposedBroker => {
    seen.push(nodeId);
    return { host, port: 40000 + nodeId };
  };

interface Walked {
  out: Buffer;
  outcome: TailOutcome;
  ready: Promise<void> | null;
  /** Bytes handed out before the last chunk was pushed. */
  early: number;
}

/** Feeds `frame` in pieces cut at `cuts` (ascending positions) and collects what would be sent. */
function walk(frame: Buffer, cuts: number[], expose: ExposeBrokerNow, version = 17): Walked {
  const s = new FetchResponseStream(version);
  const parts: Buffer[] = [];
  let prev = 0;
  let early = 0;
  for (const c of [...cuts, frame.length]) {
    if (c < prev) continue;
    early = parts.reduce((n, b) => n + b.length, 0);
    // As a reused read buffer lends its bytes: valid during the push only, then overwritten.
    const scratch = Buffer.from(frame.subarray(prev, c));
    parts.push(Buffer.from(s.push(scratch)));
    scratch.fill(0xaa);
    prev = c;
  }
  expect(s.done).toBe(true);
  const { tail, ready, outcome } = s.finish(expose);
  parts.push(tail);
  return { out: Buffer.concat(parts), outcome, ready, early };
}

function decode(frame: Buffer, version = 17): FetchResponse {
  return decodeResponseFrame(frame.subarray(4), ApiKey.Fetch, version).body as FetchResponse;
}

/** The decoded output, its pad fields (tag >= PAD_TAG, all zero) removed. */
function withoutPad(body: FetchResponse): FetchResponse {
  const unknown = (body._unknownTaggedFields ?? []).filter(
    (f) => !(f.tag >= PAD_TAG && f.data.every((b) => b === 0)),
  );
  const copy = { ...body };
  delete copy._unknownTaggedFields;
  if (unknown.length > 0) copy._unknownTaggedFields = unknown;
  return copy;
}

function expected(body: FetchResponse, host: string, outcome: TailOutcome): FetchResponse {
  const copy = { ...body };
  copy.nodeEndpoints =
    outcome === 'dropped'
      ? []
      : body.nodeEndpoints.map((e) => (e.nodeId < 0 ? e : { ...e, host, port: 40000 + e.nodeId }));
  return copy;
}

function allCutsAgree(body: FetchResponse, host: string, version: number, outcome: TailOutcome): void {
  const frame = encodeResponseFrame(ApiKey.Fetch, version, 123, body);
  const whole = walk(frame, [], exposeTo(host), version);
  expect(whole.outcome).toBe(outcome);
  expect(whole.out.length).toBe(frame.length);
  expect(whole.out.readInt32BE(4)).toBe(123);
  expect(withoutPad(decode(whole.out, version))).toEqual(expected(decode(frame, version), host, outcome));
  // Cut anywhere (and byte by byte), the walker sends the same bytes.
  for (let i = 0; i <= frame.length; i++) {
    const w = walk(frame, [i], exposeTo(host), version);
    if (!w.out.equals(whole.out)) expect.fail(`cut at ${i} of ${frame.length} differs`);
  }
  const bytewise = walk(
    frame,
    Array.from({ length: frame.length }, (_, i) => i),
    exposeTo(host),
    version,
  );
  expect(bytewise.out.equals(whole.out)).toBe(true);
}

describe('FetchResponseStream', () => {
  test('every Fetch version of the codec from v16 is one the walker knows', () => {
    // A codec update that adds a Fetch version fails here: check FetchResponse.json's notes for
    // the new version's answer layout, then widen FETCH_STREAM_VERSIONS (until then its answers
    // are decoded whole, which for Kafka 4.4's v18 cost 4x HAProxy's CPU per consumed MB).
    expect(getApiCodec(ApiKey.Fetch)!.validVersions.max).toBe(FETCH_STREAM_VERSIONS.max);
  });

  test('without NodeEndpoints the frame goes out byte for byte, cut anywhere', () => {
    for (let version = FETCH_STREAM_VERSIONS.min; version <= FETCH_STREAM_VERSIONS.max; version++) {
      const frame = encodeResponseFrame(ApiKey.Fetch, version, 9, rich([]));
      for (let i = 0; i <= frame.length; i++) {
        const w = walk(frame, [i], exposeTo('p'), version);
        expect(w.outcome).toBe('unchanged');
        expect(w.ready).toBeNull();
        expect(w.out.equals(frame)).toBe(true);
      }
      // One byte at a time.
      const w = walk(
        frame,
        Array.from({ length: frame.length }, (_, i) => i),
        exposeTo('p'),
        version,
      );
      expect(w.out.equals(frame)).toBe(true);
    }
  });

  test('NodeEndpoints rewritten to a shorter address, padded, other top-level tags kept', () => {
    const unknown = [
      { tag: 2, data: Buffer.from('two') },
      { tag: 5, data: Buffer.alloc(0) },
    ];
    const body = rich(
      [
        endpoint(1, 'broker-1.kafka.internal.example.com', 9092, 'rack-a'),
        endpoint(2, 'broker-2.kafka.internal.example.com'),
      ],
      unknown,
    );
    allCutsAgree(body, 'proxy', 17, 'rewritten');
    allCutsAgree(body, 'proxy', 16, 'rewritten');
  });

  test('NodeEndpoints rewritten to an address of the same length needs no pad', () => {
    const body = rich([endpoint(1, 'abcdefgh', 9092)]);
    const frame = encodeResponseFrame(ApiKey.Fetch, 17, 1, body);
    const w = walk(frame, [100], exposeTo('hgfedcba'));
    expect(w.outcome).toBe('rewritten');
    const out = decode(w.out);
    expect(out._unknownTaggedFields).toBeUndefined();
    expect(out.nodeEndpoints).toEqual([endpoint(1, 'hgfedcba', 40001)]);
  });

  test('NodeEndpoints dropped (and padded) when the proxy address is longer', () => {
    const body = rich(
      [endpoint(1, 'b1', 9092), endpoint(2, 'b2', 9092)],
      [{ tag: 3, data: Buffer.from('keep') }],
    );
    allCutsAgree(body, 'a-much-longer-proxy-host.example.com', 17, 'dropped');
    // One byte longer than the original cannot be padded either: dropped.
    const w = walk(encodeResponseFrame(ApiKey.Fetch, 17, 1, rich([endpoint(1, 'b1')])), [], exposeTo('b12'));
    expect(w.outcome).toBe('dropped');
  });

  test('a rewritten section one byte shorter cannot be padded: dropped', () => {
    const frame = encodeResponseFrame(ApiKey.Fetch, 17, 1, rich([endpoint(1, 'b12')]));
    const w = walk(frame, [], exposeTo('b1'));
    expect(w.outcome).toBe('dropped');
    expect(w.out.length).toBe(frame.length);
    expect(decode(w.out).nodeEndpoints).toEqual([]);
  });

  test('node -1 endpoints stay as written; the expose callback sees the others', () => {
    const seen: number[] = [];
    const body = rich([endpoint(-1, 'unknown-host'), endpoint(3, 'broker-3.example.com')]);
    const frame = encodeResponseFrame(ApiKey.Fetch, 17, 1, body);
    const w = walk(frame, [], exposeTo('px', seen));
    expect(seen).toEqual([3]);
    expect(withoutPad(decode(w.out)).nodeEndpoints).toEqual([
      endpoint(-1, 'unknown-host'),
      endpoint(3, 'px', 40003),
    ]);
  });

  test('records are forwarded before the frame is complete; only the tail is held', () => {
    const body = rich([]);
    body.responses[1]!.partitions.push(partition(99, Buffer.alloc(100_000, 7)));
    const frame = encodeResponseFrame(ApiKey.Fetch, 17, 1, body);
    // The tail here is the single byte 0 (no top-level tags).
    const w = walk(frame, [50, 5000, frame.length - 1], exposeTo('p'));
    expect(w.early).toBe(frame.length - 1);
    const s = new FetchResponseStream(17);
    expect(s.push(frame.subarray(0, frame.length - 1)).length).toBe(frame.length - 1);
    expect(s.safeBytes).toBe(frame.length - 1);
  });

  test('ready: the listener promises of newly exposed brokers are waited for', async () => {
    let open!: () => void;
    const listening = new Promise<void>((resolve) => (open = resolve));
    const expose: ExposeBrokerNow = (nodeId) => ({ host: 'p', port: 1000 + nodeId, ready: listening });
    const frame = encodeResponseFrame(ApiKey.Fetch, 17, 1, rich([endpoint(1, 'broker-1')]));
    const w = walk(frame, [], expose);
    expect(w.ready).not.toBeNull();
    let done = false;
    void w.ready!.then(() => (done = true));
    await Promise.resolve();
    expect(done).toBe(false);
    open();
    await w.ready;
    expect(done).toBe(true);
  });

  test('a rejected listener of a dropped NodeEndpoints is not left unhandled', async () => {
    const failed = Promise.reject(new Error('cannot listen'));
    const expose: ExposeBrokerNow = () => ({ host: 'a-very-long-proxy-host-name', port: 1, ready: failed });
    const w = walk(encodeResponseFrame(ApiKey.Fetch, 17, 1, rich([endpoint(1, 'b')])), [], expose);
    expect(w.outcome).toBe('dropped');
    expect(w.ready).toBeNull();
    await new Promise((r) => setTimeout(r, 0));
  });

  test('random responses, random chunkings: same length, same response but for NodeEndpoints and pads', () => {
    const bytes = (max: number) => fc.uint8Array({ maxLength: max }).map((a) => Buffer.from(a));
    const tags = (min: number) =>
      fc
        .uniqueArray(fc.integer({ min, max: 20 }), { maxLength: 3 })
        .chain((ts) =>
          fc.tuple(...[...ts].sort((a, b) => a - b).map((tag) => bytes(6).map((data) => ({ tag, data })))),
        );
    const opt = (t: TaggedField[]) => (t.length > 0 ? { _unknownTaggedFields: t } : {});
    const part = fc
      .record({
        i: fc.integer({ min: 0, max: 1000 }),
        records: fc.option(bytes(300), { nil: null }),
        aborted: fc.option(fc.array(fc.bigInt({ min: 0n, max: 1n << 40n }), { maxLength: 3 }), { nil: null }),
        leader: fc.option(fc.integer({ min: 0, max: 10 }), { nil: null }),
        tags: tags(3),
      })
      .map(({ i, records, aborted, leader, tags: t }) =>
        partition(i, records, {
          abortedTransactions:
            aborted === null ? null : aborted.map((p) => ({ producerId: p, firstOffset: p + 1n })),
          ...(leader === null ? {} : { currentLeader: { leaderId: leader, leaderEpoch: 1 } }),
          ...opt(t),
        }),
      );
    const topic = fc
      .record({
        n: fc.integer({ min: 0, max: 1 << 30 }),
        partitions: fc.array(part, { maxLength: 5 }),
        tags: tags(0),
      })
      .map(({ n, partitions, tags: t }) => ({
        ...defaultFetchableTopicResponse(),
        topicId: topicId(n),
        partitions,
        ...opt(t),
      }));
    const ep = fc
      .record({
        nodeId: fc.integer({ min: -1, max: 20 }),
        host: fc.string({ minLength: 1, maxLength: 30 }),
        port: fc.integer({ min: 1, max: 65535 }),
        rack: fc.option(fc.string({ maxLength: 5 }), { nil: null }),
      })
      .map((e): NodeEndpoint => e);
    const response = fc
      .record({
        topics: fc.array(topic, { maxLength: 4 }),
        endpoints: fc.array(ep, { maxLength: 4 }),
        tags: tags(1),
      })
      .map(({ topics, endpoints, tags: t }): FetchResponse => ({
        ...defaultFetchResponse(),
        responses: topics,
        nodeEndpoints: endpoints,
        ...opt(t),
      }));
    fc.assert(
      fc.property(
        response,
        fc.constantFrom(16, 17),
        fc.string({ minLength: 1, maxLength: 25 }),
        fc.array(fc.nat(), { maxLength: 8 }),
        (body, version, host, rawCuts) => {
          const frame = encodeResponseFrame(ApiKey.Fetch, version, 42, body);
          const cuts = rawCuts.map((c) => c % (frame.length + 1)).sort((a, b) => a - b);
          const w = walk(frame, cuts, exposeTo(host), version);
          expect(w.out.length).toBe(frame.length);
          const input = decode(frame, version);
          if (w.outcome === 'unchanged') {
            expect(w.out.equals(frame)).toBe(true);
            expect(input.nodeEndpoints.every((e) => e.nodeId < 0)).toBe(true);
          }
          expect(withoutPad(decode(w.out, version))).toEqual(expected(input, host, w.outcome));
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('FetchResponseStream on malformed frames', () => {
  const frame = encodeResponseFrame(
    ApiKey.Fetch,
    17,
    7,
    rich([endpoint(1, 'broker-1.example.com')], [{ tag: 4, data: Buffer.from('four') }]),
  );

  /** Walks `f` (in the given pieces), returning the error it raised, if any. */
  function walkError(f: Buffer, cuts: number[] = []): unknown {
    try {
      const s = new FetchResponseStream(17);
      let prev = 0;
      for (const c of [...cuts, f.length]) {
        s.push(f.subarray(prev, c));
        prev = c;
      }
      s.finish(exposeTo('p'));
      return undefined;
    } catch (err) {
      return err;
    }
  }

  function decodeError(f: Buffer): unknown {
    try {
      decode(f);
      return undefined;
    } catch (err) {
      return err;
    }
  }

  test('shorter than its fields: every truncation is a ProtocolError', () => {
    for (let n = 4; n < frame.length; n++) {
      const f = Buffer.from(frame.subarray(0, n));
      f.writeInt32BE(n - 4, 0);
      expect(walkError(f, [Math.floor(n / 2)])).toBeInstanceOf(ProtocolError);
    }
  });

  test('longer than its fields: a ProtocolError', () => {
    for (const extra of [1, 2, 10]) {
      const f = Buffer.concat([frame, Buffer.alloc(extra)]);
      f.writeInt32BE(f.length - 4, 0);
      expect(walkError(f)).toBeInstanceOf(ProtocolError);
    }
  });

  test('more bytes than the size prefix says, or fewer: a ProtocolError', () => {
    expect(walkError(Buffer.concat([frame, Buffer.alloc(3)]))).toBeInstanceOf(ProtocolError);
    const s = new FetchResponseStream(17);
    s.push(frame.subarray(0, frame.length - 1));
    expect(() => s.finish(exposeTo('p'))).toThrow(ProtocolError);
    const neg = Buffer.from(frame);
    neg.writeInt32BE(-5, 0);
    expect(walkError(neg)).toBeInstanceOf(ProtocolError);
  });

  test('a mutated byte: a ProtocolError exactly when the decoder refuses it', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 4, max: frame.length - 1 }),
        fc.integer({ min: 0, max: 255 }),
        fc.nat(),
        (at, value, cut) => {
          const f = Buffer.from(frame);
          f[at] = value;
          const walked = walkError(f, [cut % (f.length + 1)]);
          if (walked !== undefined) expect(walked).toBeInstanceOf(ProtocolError);
          expect(walked === undefined).toBe(decodeError(f) === undefined);
        },
      ),
      { numRuns: 3000 },
    );
  });

  test('a known partition tag of the wrong size is refused', () => {
    const body = rich([]);
    body.responses[0]!.partitions[2]!.currentLeader._unknownTaggedFields = [
      { tag: 9, data: Buffer.from([1]) },
    ];
    const good = encodeResponseFrame(ApiKey.Fetch, 17, 1, body);
    // currentLeader (tag 1) is 8 fixed bytes + [1 count, 9, 1, 1] = 12: find "01 0c" and lie about it.
    const at = good.indexOf(Buffer.from([0x01, 0x0c, 0x00, 0x00, 0x00, 0x02]));
    expect(at).toBeGreaterThan(0);
    const bad = Buffer.from(good);
    bad[at + 1] = 0x0b;
    expect(walkError(bad)).toBeInstanceOf(ProtocolError);
    expect(decodeError(bad)).toBeInstanceOf(ProtocolError);
  });
});

describe('encodeTaggedSection', () => {
  test('pads any section to any length at least 2 bytes longer, ascending tags, exact length', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 0, max: 125 }), { maxLength: 4 }),
        fc.integer({ min: 0, max: 20_000 }),
        fc.integer({ min: 2, max: 20_000 }),
        (tags, dataLen, extra) => {
          const fields = [...tags]
            .sort((a, b) => a - b)
            .map((tag) => ({ tag, data: Buffer.alloc(dataLen % 120, 1) }));
          let size = 1;
          for (const f of fields) size += 2 + (f.tag >= 128 ? 1 : 0) + f.data.length;
          expect(encodeTaggedSection(fields, size - 1)).toBeNull();
          const out = encodeTaggedSection(fields, size + extra)!;
          expect(out).not.toBeNull();
          expect(out.length).toBe(size + extra);
          const r = new Reader(out);
          const read = r.rawTaggedFields() ?? [];
          r.expectEnd();
          for (let i = 1; i < read.length; i++) expect(read[i]!.tag).toBeGreaterThan(read[i - 1]!.tag);
          expect(read.slice(0, fields.length)).toEqual(fields);
          expect(encodeTaggedSection(fields, size + 1)).toBeNull();
          expect(encodeTaggedSection(fields, size)!.length).toBe(size);
        },
      ),
    );
  });

  test('above a broker tag of 127 or more the pad tag takes 2 bytes: at least 3 bytes to pad', () => {
    const fields = [{ tag: 200, data: Buffer.from('x') }];
    expect(encodeTaggedSection(fields, 1 + 4 + 2)).toBeNull();
    for (let extra = 3; extra < 300; extra++) {
      const out = encodeTaggedSection(fields, 1 + 4 + extra)!;
      const read = new Reader(out).rawTaggedFields()!;
      expect(read[0]).toEqual(fields[0]);
      expect(read[1]!.tag).toBe(201);
    }
  });

  test('the varint gaps (a pad of 129 or 16386 bytes) take two pad fields', () => {
    for (const target of [130, 131, 16387, 16388]) {
      const out = encodeTaggedSection([], target)!;
      expect(out.length).toBe(target);
      const r = new Reader(out);
      r.rawTaggedFields();
      r.expectEnd();
    }
  });

  test('rewriteFetchTail refuses a malformed section', () => {
    expect(() => rewriteFetchTail(Buffer.alloc(0), exposeTo('p'))).toThrow(ProtocolError);
    expect(() => rewriteFetchTail(Buffer.from([1, 0, 1, 5]), exposeTo('p'))).toThrow(ProtocolError);
    expect(() => rewriteFetchTail(Buffer.from([0, 0]), exposeTo('p'))).toThrow(ProtocolError);
  });
});

describe('a ProxyConnection streaming Fetch v17 responses', () => {
  /** A fake broker answering every request with the next of `responses`, a ProxyConnection in front. */
  const bed = (
    responses: (correlationId: number) => Buffer,
    expose: ExposeBrokerNow,
    requestsPerWrite = 1,
  ): Promise<ConnectionBed> =>
    connectionBed(
      responses,
      {
        plans: new ApiPlans({
          extension: null,
          streamFetch: true,
          rewrites: (apiKey, apiVersion) => apiKey === ApiKey.Fetch && apiVersion >= 16,
        }),
        // A response that waits behind another is taken whole (the responses here have no NodeEndpoints then).
        rewriteResponse: () => Promise.resolve(false),
        exposeBroker: expose,
      },
      requestsPerWrite,
    );

  const fetchRequest = (correlationId: number): Buffer =>
    encodeRequestFrame(
      { apiKey: ApiKey.Fetch, apiVersion: 17, correlationId, clientId: 't' },
      defaultFetchRequest(),
    );

  const until = async (cond: () => boolean): Promise<void> => {
    for (let i = 0; i < 200 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
    expect(cond()).toBe(true);
  };

  test('the bulk goes out before the listener is open; the tail and later responses wait for it', async () => {
    let open!: () => void;
    const listening = new Promise<void>((resolve) => (open = resolve));
    const withEndpoints = rich([endpoint(5, 'broker-5.kafka.internal.example.com')]);
    const frames = new Map<number, Buffer>([
      [1, encodeResponseFrame(ApiKey.Fetch, 17, 1, withEndpoints)],
      [2, encodeResponseFrame(ApiKey.Fetch, 17, 2, rich([]))],
    ]);
    const b = await bed(
      (id) => frames.get(id)!,
      (nodeId) => ({ host: 'proxy', port: 30000 + nodeId, ready: listening }),
      2,
    );
    try {
      b.client.write(Buffer.concat([fetchRequest(1), fetchRequest(2)]));
      const first = frames.get(1)!;
      const safe = new FetchResponseStream(17).push(first).length;
      expect(safe).toBeLessThan(first.length - 30);
      await until(() => b.received().length >= safe);
      await new Promise((r) => setTimeout(r, 50));
      // Held: the tail of the first response, and all of the second.
      expect(b.received().length).toBeLessThan(first.length);
      open();
      const total = first.length + frames.get(2)!.length;
      await until(() => b.received().length === total);
      const got = b.received();
      const one = decode(got.subarray(0, first.length));
      expect(one.nodeEndpoints).toEqual([endpoint(5, 'proxy', 30005)]);
      expect(withoutPad({ ...one, nodeEndpoints: withEndpoints.nodeEndpoints })).toEqual(decode(first));
      expect(got.subarray(first.length).equals(frames.get(2)!)).toBe(true);
    } finally {
      await b.stop();
    }
  });

  test('a malformed Fetch response closes the connection pair', async () => {
    const good = encodeResponseFrame(ApiKey.Fetch, 17, 1, rich([]));
    const bad = Buffer.concat([good, Buffer.from([0, 0])]);
    bad.writeInt32BE(bad.length - 4, 0);
    const b = await bed(() => bad, exposeTo('p'));
    try {
      b.client.write(fetchRequest(1));
      await b.closed;
    } finally {
      await b.stop();
    }
  });
});
