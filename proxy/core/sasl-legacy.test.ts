import { describe, expect, test } from 'vitest';
import { LegacySaslExchange, legacySaslRoundTrips } from './sasl-legacy.js';

/** How many of the client's next frames are raw tokens (stops at 10). */
function rawTokens(x: LegacySaslExchange): number {
  let n = 0;
  while (n < 10 && x.takeRawToken()) n++;
  return n;
}

describe('LegacySaslExchange', () => {
  test("after a successful handshake, the mechanism's round trips are raw tokens, then requests again", () => {
    for (const [mechanism, trips] of [
      ['PLAIN', 1],
      ['SCRAM-SHA-256', 2],
      ['scram-sha-512', 2],
      ['OAUTHBEARER', 1],
    ] as const) {
      const x = new LegacySaslExchange();
      expect(x.takeRawToken()).toBe(false);
      x.handshakeRequested(mechanism);
      // Nothing is raw before the broker has accepted the handshake.
      expect(x.takeRawToken()).toBe(false);
      x.handshakeAnswered(0);
      expect(rawTokens(x), mechanism).toBe(trips);
      expect(legacySaslRoundTrips(mechanism)).toBe(trips);
    }
  });

  test('a refused handshake, or an answer without a request, starts no raw exchange', () => {
    const refused = new LegacySaslExchange();
    refused.handshakeRequested('PLAIN');
    refused.handshakeAnswered(33); // UNSUPPORTED_SASL_MECHANISM
    expect(rawTokens(refused)).toBe(0);
    const unasked = new LegacySaslExchange();
    unasked.handshakeAnswered(0);
    expect(rawTokens(unasked)).toBe(0);
  });

  test('a mechanism whose round trips are not known is refused, not guessed', () => {
    const x = new LegacySaslExchange();
    x.handshakeRequested('GSSAPI');
    expect(() => x.handshakeAnswered(0)).toThrow(/GSSAPI is not supported/);
    expect(rawTokens(x)).toBe(0);
  });
});
