import { describe, expect, test } from 'vitest';
import { globToRegExp } from '../common/glob.js';
import { GuardPolicy, parseCasMetadata, parseGroupOverrides } from './guard-policy.js';

describe('compare-and-set metadata', () => {
  test('cas:<expected> and cas:<expected>;<metadata>', () => {
    expect(parseCasMetadata('cas:-1')).toEqual({ expected: -1n, metadata: '' });
    expect(parseCasMetadata('cas:42;hello')).toEqual({ expected: 42n, metadata: 'hello' });
    expect(parseCasMetadata('cas:7;a;b')).toEqual({ expected: 7n, metadata: 'a;b' });
    expect(parseCasMetadata('cas:9223372036854775807')).toEqual({
      expected: 9223372036854775807n,
      metadata: '',
    });
  });

  test('anything else is plain metadata', () => {
    for (const m of [
      null,
      '',
      'hello',
      'cas:',
      'cas:x',
      'cas:-2',
      'cas:1 ;x',
      'CAS:1',
      'cas:9223372036854775808',
      'cas:99999999999999999999',
    ]) {
      expect(parseCasMetadata(m), String(m)).toBeUndefined();
    }
  });
});

describe('guard per group', () => {
  test('the first matching override wins, else the default', () => {
    const policy = new GuardPolicy('fence', parseGroupOverrides('legacy-*=off, billing=cas,*-cas=cas'));
    expect(policy.modeFor('legacy-etl')).toBe('off');
    expect(policy.modeFor('billing')).toBe('cas');
    expect(policy.modeFor('billing-2')).toBe('fence');
    expect(policy.modeFor('orders-cas')).toBe('cas');
    expect(policy.modeFor('orders')).toBe('fence');
  });

  test('patterns are literal except *', () => {
    expect(globToRegExp('a.b*').test('a.bcd')).toBe(true);
    expect(globToRegExp('a.b*').test('axbcd')).toBe(false);
    expect(globToRegExp('(x)').test('(x)')).toBe(true);
  });

  test('bad overrides are refused with the part named', () => {
    expect(() => parseGroupOverrides('g=strict')).toThrow(/g=strict/);
    expect(() => parseGroupOverrides('=cas')).toThrow(/=cas/);
  });
});
