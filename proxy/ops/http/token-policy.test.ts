// Which admin tokens the proxy accepts at start: a table of refused placeholders and weak values,
// and of accepted random ones.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { MIN_TOKEN_BYTES, tokenProblem } from './token-policy.js';

describe('tokenProblem', () => {
  const refused: [string, RegExp][] = [
    ['', /empty/],
    ['has a space in it here', /space/],
    ['tab\there-0123456789', /space, control/],
    ['ünïcödé-0123456789abc', /non-ASCII/],
    ['change-me', /shorter than 16 bytes/],
    ['changeme', /shorter than 16 bytes/],
    ['demo-token', /shorter than 16 bytes/],
    ['secret', /shorter than 16 bytes/],
    ['token', /shorter than 16 bytes/],
    ['password', /shorter than 16 bytes/],
    ['s3cret', /shorter than 16 bytes/],
    ['a1b2c3d4e5f6g7h', /shorter than 16 bytes/],
    ['change-me-please', /placeholder/],
    ['CHANGE_ME_CHANGE_ME', /placeholder/],
    ['demo-token-demo-token', /placeholder/],
    ['your-secret-token-here', /placeholder/],
    ['replace-with-a-random-token'.replace('-a-', '-'), /placeholder/],
    ['changeme1234567890', /placeholder/],
    ['admin-secret-token', /placeholder/],
    ['kafka-offset-proxy-token', /placeholder/],
    ['password-password', /placeholder/],
    ['aaaaaaaaaaaaaaaaaaaa', /distinct characters/],
    ['0101010101010101', /distinct characters/],
  ];
  it.each(refused)('refuses %j', (token, why) => {
    const problem = tokenProblem(token);
    expect(problem).toMatch(why);
    // The reason is printed: it must not repeat the token.
    if (token.length > 3) expect(problem).not.toContain(token);
  });

  const accepted = [
    'fencing-7d2c91e4b05a3f68',
    '9f86d081884c7d659a2feaa0c55ad015',
    'Zm9vYmFyYmF6cXV4cXV1eA==',
    '!@#$%^&*()_+{}|:<>?',
    '1234567890123456',
  ];
  it.each(accepted)('accepts %j', (token) => {
    expect(tokenProblem(token)).toBeNull();
  });

  it(`accepts what openssl rand -hex/-base64 and the Helm chart generate (${MIN_TOKEN_BYTES}+ bytes)`, () => {
    const alnum = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
    for (let i = 0; i < 2000; i++) {
      const bytes = randomBytes(32);
      expect(tokenProblem(bytes.toString('hex').slice(0, 32))).toBeNull();
      expect(tokenProblem(bytes.toString('base64'))).toBeNull();
      // helm's randAlphaNum 32
      expect(tokenProblem([...bytes].map((b) => alnum[b % alnum.length]).join(''))).toBeNull();
    }
  });
});
