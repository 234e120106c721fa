import { ReplyError } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { isCorruptionReply, redisReplyCode } from './redis-reply.js';

// Replies as Redis 7 sends them (a script's error keeps its code as the first word).
describe('redisReplyCode', () => {
  it.each([
    ['WRONGTYPE Operation against a key holding the wrong kind of value', 'WRONGTYPE', true],
    [
      'WRONGTYPE Operation against a key holding the wrong kind of value script: ad66cc4f, on @user_script:1.',
      'WRONGTYPE',
      true,
    ],
    ['KOPCORRUPT group state is not a group record', 'KOPCORRUPT', true],
    ['KOPCORRUPT x script: 34a9953e, on @user_script:1.', 'KOPCORRUPT', true],
    // Words inside the text are not the code: only the first one is.
    ['ERR user_script:1: WRONGTYPE said by the script', 'ERR', false],
    ['ERR unknown group update KOPCORRUPT', 'ERR', false],
    ['MOVED 3999 127.0.0.1:6381', 'MOVED', false],
    ['ASK 3999 127.0.0.1:6381', 'ASK', false],
    ['CLUSTERDOWN The cluster is down', 'CLUSTERDOWN', false],
    ['TRYAGAIN Multiple keys request during rehashing of slot', 'TRYAGAIN', false],
    ["READONLY You can't write against a read only replica.", 'READONLY', false],
    ['NOAUTH Authentication required.', 'NOAUTH', false],
    ['WRONGPASS invalid username-password pair or user is disabled.', 'WRONGPASS', false],
    ['NOPERM User kop has no permissions to run the eval command', 'NOPERM', false],
    ['LOADING Redis is loading the dataset in memory', 'LOADING', false],
    ['BUSY Redis is busy running a script.', 'BUSY', false],
    ['NOSCRIPT No matching script. Please use EVAL.', 'NOSCRIPT', false],
    ["OOM command not allowed when used memory > 'maxmemory'.", 'OOM', false],
    ['MASTERDOWN Link with MASTER is down', 'MASTERDOWN', false],
    ['MISCONF Redis is configured to save RDB snapshots', 'MISCONF', false],
    ['NOREPLICAS Not enough good replicas to write.', 'NOREPLICAS', false],
    ['EXECABORT Transaction discarded because of previous errors.', 'EXECABORT', false],
    ['WRONGTYPEX not a code of ours', 'OTHER', false],
    ['wrongtype lower case is another word', 'OTHER', false],
    ['', 'OTHER', false],
  ])('%s: %s', (message, code, corruption) => {
    const reply = new ReplyError(message);
    expect(redisReplyCode(reply)).toBe(code);
    expect(isCorruptionReply(reply)).toBe(corruption);
  });

  it('is null for anything that is not a Redis reply, whatever its text', () => {
    for (const err of [
      new Error('WRONGTYPE Operation against a key holding the wrong kind of value'),
      new Error('KOPCORRUPT group state is not a group record'),
      Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
      'WRONGTYPE',
      undefined,
    ]) {
      expect(redisReplyCode(err)).toBeNull();
      expect(isCorruptionReply(err)).toBe(false);
    }
  });
});
