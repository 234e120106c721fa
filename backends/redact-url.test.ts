import { describe, expect, it } from 'vitest';
import { ReplyError } from 'ioredis';
import { describeConnectionError } from './connection-problem.js';
import { redactUrl } from './redact-url.js';
import { parseRedisUrl } from './redis-url.js';
import { parseZooKeeperUrl } from './zookeeper-url.js';

describe('redactUrl', () => {
  it.each([
    ['redis://:hunter2@redis:6379/0', 'redis://:***@redis:6379/0'],
    ['redis://hunter2@redis:6379', 'redis://***@redis:6379'],
    ['rediss://app:p@ss@redis:6380', 'rediss://app:***@redis:6380'],
    ['redis://h:6379?password=hunter2&wait=1', 'redis://h:6379?password=***&wait=1'],
    ['redis://h:6379?prefix=kop&Password=x', 'redis://h:6379?prefix=kop&Password=***'],
    [
      'redis+sentinel://u:pw@s1:26379,s2:26379/mymaster?sentinelPassword=spw',
      'redis+sentinel://u:***@s1:26379,s2:26379/mymaster?sentinelPassword=***',
    ],
    ['redis+cluster://u:pw1@a:1,u:pw2@b:2', 'redis+cluster://u:***@a:1,u:***@b:2'],
    ['redis+cluster://:p,w@a:1,b:2', 'redis+cluster://:***@a:1,b:2'],
    ['zk://kop:zpw@zk1:2181,zk2:2181/kop', 'zk://kop:***@zk1:2181,zk2:2181/kop'],
    ['zk://zk1:2181,zk2:2181/kop', 'zk://zk1:2181,zk2:2181/kop'],
    ['redis://:pa/ss@h:1', 'redis://:***@h:1'],
    ['user:secret@host', '***@host'],
    ['embedded:/var/lib/kop', 'embedded:/var/lib/kop'],
  ])('%s', (url, redacted) => {
    expect(redactUrl(url)).toBe(redacted);
  });
});

describe('store URL errors never repeat a password', () => {
  it.each([
    'redis://:s3cret@h:99999',
    'redis://u:s3cret@h/x',
    'rediss://app:p@s3cret@h:99999',
    'redis://:pa/s3cret@h:99999',
    'redis+cluster://u:s3cret@a:1,u:s3cret@b:2',
    'redis+sentinel://:s3cret@a:1,b:2',
    'redis://h?password=s3cret&wiat=1',
    'redis://h?password=s3cret&waitTimeoutMs=x',
    'redis://h?sentinelPassword=s3cret',
    'redis://%zz:s3cret@h',
  ])('%s', (url) => {
    expect(() => parseRedisUrl(url)).toThrow();
    expect(() => parseRedisUrl(url)).toThrow(/^(?!.*s3cret)/s);
  });

  it.each([
    'zk://u:s3cret@h/x',
    'zk://u:s3cret@h:1//x',
    'zk://u:s3cret@h:1?maxMultiBytes=x',
    'zk://s3cret@h:1',
  ])('%s', (url) => {
    expect(() => parseZooKeeperUrl(url)).toThrow();
    expect(() => parseZooKeeperUrl(url)).toThrow(/^(?!.*s3cret)/s);
  });

  it('the password forms are understood', () => {
    expect(parseRedisUrl('redis://h:1?username=app&password=pw')).toMatchObject({
      username: 'app',
      password: 'pw',
    });
    expect(parseRedisUrl('redis+sentinel://:pw@a:1/m?sentinelPassword=spw')).toMatchObject({
      password: 'pw',
      sentinelPassword: 'spw',
    });
    expect(parseRedisUrl('redis+sentinel://:pw@a:1/m').sentinelPassword).toBe('pw');
    expect(parseRedisUrl('rediss://app:p@ss/w@h:1')).toMatchObject({ username: 'app', password: 'p@ss/w' });
    expect(parseZooKeeperUrl('zk://kop:p%40ss@a:1/c')).toEqual({
      connectString: 'a:1',
      chroot: '/c',
      digest: 'kop:p@ss',
    });
  });
});

describe('connection errors in words', () => {
  const err = (code: string, extra: Record<string, unknown> = {}, message = code) =>
    Object.assign(new Error(message), { code, ...extra });
  const named = (name: string, message: string, extra: Record<string, unknown> = {}) =>
    Object.assign(new Error(message), { name, ...extra });
  // Told by structure only: every row whose words depend on the message text would fail (the
  // plain Errors below carry the texts that used to be matched, and must not be recognised).
  it.each([
    [
      err('ECONNREFUSED', { address: '10.0.0.1', port: 6379 }),
      'standalone',
      'connection refused to 10.0.0.1:6379',
    ],
    [err('ETIMEDOUT'), 'standalone', 'connection to r:6379 timed out'],
    [err('ENOTFOUND', { hostname: 'redis.internal' }), 'standalone', 'host redis.internal not found'],
    [err('ECONNRESET', {}, 'read ECONNREFUSED'), 'standalone', 'connection to r:6379 was reset'],
    [
      new ReplyError('WRONGPASS invalid username-password pair or user is disabled.'),
      'standalone',
      'authentication refused by r:6379',
    ],
    [new ReplyError('NOAUTH Authentication required.'), 'cluster', 'authentication refused by r:6379'],
    [
      new ReplyError('LOADING Redis is loading the dataset in memory'),
      'standalone',
      'r:6379 answers LOADING',
    ],
    [
      new ReplyError("READONLY You can't write against a read only replica."),
      'sentinel',
      'r:6379 answers READONLY',
    ],
    [new Error('WRONGPASS invalid username-password pair'), 'standalone', 'Error at r:6379'],
    [
      new Error(
        'All sentinels are unreachable. Retrying from scratch after 10ms. Last error: connect ECONNREFUSED 127.0.0.1:26379',
      ),
      'sentinel',
      'no sentinel answers at r:6379',
    ],
    [new Error('All sentinels are unreachable.'), 'standalone', 'Error at r:6379'],
    [
      named('ClusterAllFailedError', 'Failed to refresh slots cache.'),
      'cluster',
      'no cluster node answers at r:6379',
    ],
    [
      named('ClusterAllFailedError', 'Failed to refresh slots cache.', {
        lastNodeError: err('ECONNREFUSED', { address: 'a', port: 1 }),
      }),
      'cluster',
      'connection refused to a:1',
    ],
    [new Error('Failed to refresh slots cache.'), 'cluster', 'Error at r:6379'],
    [
      err('ERR_SSL_WRONG_VERSION_NUMBER', { address: 'h', port: 2 }),
      'standalone',
      'TLS handshake with h:2 failed (ERR_SSL_WRONG_VERSION_NUMBER)',
    ],
  ] as const)('%s (%s)', (e, reach, words) => {
    expect(describeConnectionError(e, 'r:6379', reach)).toBe(words);
  });
});
