// A ConfigError carries its parts as fields, so callers word it without matching or rewriting
// its message: the message the proxy prints, and the `--key=value: reason` line of the offsets CLI.
import { describe, expect, test } from 'vitest';
import { ConfigError } from './config-error.js';

describe('ConfigError', () => {
  test.each([
    {
      key: 'data-dir',
      shown: '/var/lib/kop',
      reason: 'not writable; expected a writable directory on a real file system',
      message:
        'invalid configuration: data-dir="/var/lib/kop": not writable; expected a writable directory on a real file system',
      flag: '--data-dir="/var/lib/kop": not writable; expected a writable directory on a real file system',
    },
    {
      key: 'store',
      shown: 'redis://:***@h:6379',
      reason: 'cannot open the store: invalid configuration: nested',
      message:
        'invalid configuration: store="redis://:***@h:6379": cannot open the store: invalid configuration: nested',
      flag: '--store="redis://:***@h:6379": cannot open the store: invalid configuration: nested',
    },
    {
      key: 'argument',
      shown: 'stray',
      reason: 'unexpected argument (options start with --; see --help)',
      message:
        'invalid configuration: argument="stray": unexpected argument (options start with --; see --help)',
      flag: '--argument="stray": unexpected argument (options start with --; see --help)',
    },
    {
      key: 'max-in-flight',
      shown: null,
      reason: 'missing value: expected a whole number',
      message: 'invalid configuration: max-in-flight=null: missing value: expected a whole number',
      flag: '--max-in-flight=null: missing value: expected a whole number',
    },
    {
      key: 'native-relay',
      shown: undefined,
      reason: 'the native relay addon is missing',
      message: 'invalid configuration: native-relay=undefined: the native relay addon is missing',
      flag: '--native-relay=undefined: the native relay addon is missing',
    },
  ])('$key=$shown', ({ key, shown, reason, message, flag }) => {
    const err = new ConfigError(key, shown, reason);
    expect(err.key).toBe(key);
    expect(err.reason).toBe(reason);
    expect(err.shown).toBe(String(JSON.stringify(shown)));
    expect(err.message).toBe(message);
    expect(err.asFlag()).toBe(flag);
    expect(err.name).toBe('ConfigError');
  });
});
