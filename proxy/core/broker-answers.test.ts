// What happens to the broker's answer of each forwarded request, by its plan: passed on as
// written, walked for Produce NodeEndpoints, or decoded, rewritten by the core, shown to the
// extension (which may replace it), noted by the legacy SASL exchange; a bad answer closes.
import { expect, test } from 'vitest';
import { decodeResponseFrame, encodeResponseFrame } from '../../protocol/frames.js';
import { ApiKey } from '../../protocol/messages/index.js';
import type { AnyRequest, AnyResponse } from '../../protocol/messages/index.js';
import { defaultJoinGroupRequest } from '../../protocol/messages/join-group-request.js';
import { defaultJoinGroupResponse } from '../../protocol/messages/join-group-response.js';
import { defaultMetadataResponse } from '../../protocol/messages/metadata-response.js';
import { defaultProduceResponse } from '../../protocol/messages/produce-response.js';
import { defaultSaslHandshakeResponse } from '../../protocol/messages/sasl-handshake-response.js';
import { recordingHost } from '../../test/harness/connection-parts.js';
import type { AnswerPlan } from './api-plan.js';
import { BrokerAnswers } from './broker-answers.js';
import type { AnyExchange, ProxyExtension } from './extension.js';
import type { Pending } from './response-queue.js';
import { LegacySaslExchange } from './sasl-legacy.js';

const settle = () => new Promise<void>((r) => setImmediate(r));
const decoded = (observed: boolean, coreRewrite: boolean, legacySasl = false): AnswerPlan => ({
  response: 'decode',
  legacySasl,
  coreRewrite,
  observed,
});

function answersBed(opts: { rewrite?: (r: AnyResponse) => boolean; extension?: ProxyExtension } = {}) {
  const host = recordingHost();
  const completed: { p: Pending; out: Buffer; parts: Buffer[] }[] = [];
  const rewritten: AnyResponse[] = [];
  const legacySasl = new LegacySaslExchange();
  const answers = new BrokerAnswers(
    host,
    { complete: (p, out) => completed.push({ p, out: Buffer.concat(out), parts: out }) },
    legacySasl,
    {
      extension: opts.extension ?? null,
      rewriteResponse: (r) => {
        rewritten.push(r);
        return Promise.resolve(opts.rewrite?.(r) ?? false);
      },
    },
  );
  return { host, completed, rewritten, legacySasl, answers };
}

test("'as-is': the broker's bytes, at once", () => {
  const { completed, answers } = answersBed();
  const p = answers.pending(
    { correlationId: 4, apiKey: 0, apiVersion: 9 },
    0,
    { response: 'as-is' },
    null,
    null,
  );
  expect(p).toMatchObject({ kind: 'broker', correlationId: 4, response: 'as-is' });
  p.onResponse(Buffer.from('anything'));
  expect(completed.map((c) => c.out.subarray(4).toString())).toEqual(['anything']);
  expect(completed[0]!.out.readInt32BE(0)).toBe(8);
});

test('decoded and rewritten by the core: encoded again only when the rewrite changed it', async () => {
  const frame = encodeResponseFrame(ApiKey.Metadata, 12, 5, defaultMetadataResponse()).subarray(4);
  const unchanged = answersBed();
  const p1 = unchanged.answers.pending(
    { correlationId: 5, apiKey: 3, apiVersion: 12 },
    0,
    decoded(false, true),
    null,
    null,
  );
  p1.onResponse(frame);
  expect(unchanged.answers.quiescent).toBe(false);
  await settle();
  expect(unchanged.rewritten.map((r) => r.apiKey)).toEqual([ApiKey.Metadata]);
  // Not encoded again: the broker's own bytes go back.
  expect(unchanged.completed[0]!.parts[1]).toBe(frame);
  expect(unchanged.answers.quiescent).toBe(true);
  expect(unchanged.host.nativeTries).toBe(1);

  const changed = answersBed({
    rewrite: (r) => {
      if (r.apiKey !== ApiKey.Metadata) return false;
      r.body.clusterId = 'rewritten';
      return true;
    },
  });
  changed.answers
    .pending({ correlationId: 5, apiKey: 3, apiVersion: 12 }, 0, decoded(false, true), null, null)
    .onResponse(frame);
  await settle();
  const out = changed.completed[0]!.out.subarray(4);
  expect(decodeResponseFrame(out, ApiKey.Metadata, 12).body.clusterId).toBe('rewritten');
});

test('observed: the extension sees request and answer as one exchange and may replace the answer', async () => {
  const seen: AnyExchange[] = [];
  const extension: ProxyExtension = {
    name: 'test',
    apiKeys: new Set([ApiKey.JoinGroup]),
    onResponse: (_info, exchange) => {
      seen.push(exchange);
      return Promise.resolve({ ...defaultJoinGroupResponse(), generationId: 42 });
    },
  };
  const { host, completed, rewritten, answers } = answersBed({ extension });
  const request: AnyRequest = {
    apiKey: ApiKey.JoinGroup,
    body: { ...defaultJoinGroupRequest(), groupId: 'g' },
  };
  const h = { correlationId: 9, apiKey: ApiKey.JoinGroup, apiVersion: 9 };
  answers
    .pending(h, 0, decoded(true, false), host.requestInfo(h), request)
    .onResponse(encodeResponseFrame(ApiKey.JoinGroup, 9, 9, defaultJoinGroupResponse()).subarray(4));
  await settle();
  expect(rewritten).toEqual([]);
  expect(seen.map((e) => (e.apiKey === ApiKey.JoinGroup ? e.request.groupId : null))).toEqual(['g']);
  const out = completed[0]!.out.subarray(4);
  expect(decodeResponseFrame(out, ApiKey.JoinGroup, 9).body.generationId).toBe(42);
});

test('a legacy SASL handshake answered with success starts the raw tokens', async () => {
  const { legacySasl, answers } = answersBed();
  legacySasl.handshakeRequested('PLAIN');
  answers
    .pending(
      { correlationId: 1, apiKey: ApiKey.SaslHandshake, apiVersion: 0 },
      0,
      decoded(false, false, true),
      null,
      null,
    )
    .onResponse(encodeResponseFrame(ApiKey.SaslHandshake, 0, 1, defaultSaslHandshakeResponse()).subarray(4));
  await settle();
  expect(legacySasl.expectsRawToken).toBe(true);
});

test("'walk-produce' without NodeEndpoints: the broker's bytes at once; a bad answer closes the pair", async () => {
  const { host, completed, answers } = answersBed();
  const frame = encodeResponseFrame(ApiKey.Produce, 11, 2, defaultProduceResponse()).subarray(4);
  answers
    .pending({ correlationId: 2, apiKey: 0, apiVersion: 11 }, 0, { response: 'walk-produce' }, null, null)
    .onResponse(frame);
  expect(completed[0]!.out.subarray(4)).toEqual(frame);
  answers
    .pending({ correlationId: 3, apiKey: 3, apiVersion: 12 }, 0, decoded(false, true), null, null)
    .onResponse(Buffer.from([0, 0, 0, 3, 1]));
  await settle();
  expect(host.closes.map((c) => c.reason)).toEqual(['response handling failed']);
  expect(answers.quiescent).toBe(true);
});
