/**
 * The topic cache of `--unknown-topics reject` (BrokerLookups.topicExists) against a fake cluster
 * client: what needs a Metadata request, and what a broker that does not answer holds up.
 */
import { describe, expect, test } from 'vitest';
import { ClusterRequestError } from '../client/cluster-client.js';
import type { ClusterClient, ClusterErrorCode } from '../client/cluster-client.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { BrokerLookups, NAMED_OFFSETS_MAX_VERSION } from './broker-lookups.js';
import { mirrorCommit } from './commit-mirror.js';

const CACHE_MS = 30;

/** A cluster whose Metadata answers come from `answer`; `within` adds no deadline here. */
function cluster(
  answer: () => Promise<{ topics: { name: string; errorCode: number; partitions: unknown[] }[] }>,
) {
  const calls = { metadata: 0 };
  const client = {
    metadata: () => {
      calls.metadata++;
      return answer();
    },
    within: <T>(_what: string, work: () => Promise<T>) => work(),
  } as unknown as ClusterClient;
  return { client, calls };
}

const topic = (name: string, partitions: number) => ({
  name,
  errorCode: 0,
  partitions: Array.from({ length: partitions }, () => ({})),
});
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** The promise's value, or 'pending' if it has none after `ms`. */
const within = <T>(p: Promise<T>, ms = 50) => Promise.race([p, sleep(ms).then(() => 'pending' as const)]);

describe('BrokerLookups.topicExists', () => {
  test('a fresh cache answers without a request, for partitions it has and has not', async () => {
    const { client, calls } = cluster(async () => ({ topics: [topic('t', 3)] }));
    const lookups = new BrokerLookups(client, 60_000);
    expect(await lookups.topicExists('t', 2)).toBe(true);
    expect(await lookups.topicExists('t', 3)).toBe(false);
    expect(await lookups.topicExists('t', -1)).toBe(false);
    expect(calls.metadata).toBe(1);
  });

  test('an old cache answers for a partition it has at once, and is refreshed in the background', async () => {
    let frozen = false;
    const { client, calls } = cluster(() =>
      frozen ? new Promise(() => {}) : Promise.resolve({ topics: [topic('t', 3)] }),
    );
    const lookups = new BrokerLookups(client, CACHE_MS);
    expect(await lookups.topicExists('t', 0)).toBe(true);
    frozen = true; // the broker stops answering
    await sleep(CACHE_MS + 10);
    expect(await within(lookups.topicExists('t', 1))).toBe(true);
    expect(calls.metadata).toBe(2);
    // One refresh at a time, however many commits ask meanwhile.
    expect(await within(lookups.topicExists('t', 2))).toBe(true);
    expect(calls.metadata).toBe(2);
  });

  test('what an old cache lacks waits for the refresh, and a topic deleted since is refused', async () => {
    let topics = [topic('t', 3), topic('gone', 1)];
    let release: () => void = () => {};
    let held = false;
    const { client } = cluster(async () => {
      if (held) await new Promise<void>((r) => (release = r));
      return { topics };
    });
    const lookups = new BrokerLookups(client, CACHE_MS);
    expect(await lookups.topicExists('gone', 0)).toBe(true);
    topics = [topic('t', 3), topic('new', 2)];
    held = true;
    await sleep(CACHE_MS + 10);
    const asked = lookups.topicExists('new', 1);
    expect(await within(asked)).toBe('pending');
    held = false;
    release();
    expect(await asked).toBe(true);
    // The refresh that answered it also learnt of the deletion.
    expect(await lookups.topicExists('gone', 0)).toBe(false);
  });
});

describe('BrokerLookups: offsets asked of the broker by topic name', () => {
  /** A cluster whose coordinator is node 1 and which records each request's highest version. */
  function recording() {
    const asked: [number, number | undefined][] = [];
    const client = {
      within: <T>(_what: string, work: () => Promise<T>) => work(),
      coordinatorOf: () => Promise.resolve(1),
      request: (_node: number, apiKey: number, _body: unknown, atMost?: number) => {
        asked.push([apiKey, atMost]);
        const body =
          apiKey === ApiKey.OffsetFetch
            ? { groups: [{ groupId: 'g', errorCode: 0, topics: [] }] }
            : { topics: [{ name: 't', partitions: [{ partitionIndex: 0, errorCode: 0 }] }] };
        return Promise.resolve({ version: 9, body });
      },
    } as unknown as ClusterClient;
    return { client, asked };
  }

  test('OffsetFetch and mirrored OffsetCommit go in v9 at most (v10 names topics by id)', async () => {
    const { client, asked } = recording();
    const lookups = new BrokerLookups(client);
    await lookups.fetchOffsets('g', [{ topic: 't', partition: 0 }], true);
    const write = {
      topic: 't',
      partition: 0,
      offset: 1n,
      leaderEpoch: -1,
      metadata: '',
      commitTimestamp: 0n,
      expireTimestamp: -1n,
    };
    await mirrorCommit(lookups, 'g', { generationIdOrMemberEpoch: -1, memberId: '', groupInstanceId: null }, [
      write,
    ]);
    expect(asked).toEqual([
      [ApiKey.OffsetFetch, NAMED_OFFSETS_MAX_VERSION],
      [ApiKey.OffsetCommit, NAMED_OFFSETS_MAX_VERSION],
    ]);
    expect(NAMED_OFFSETS_MAX_VERSION).toBe(9);
  });
});

describe('BrokerLookups: a broker without a describe API', () => {
  /** A cluster whose coordinator is node 1 and whose version lookups fail with `code`. */
  function failingVersions(code: Exclude<ClusterErrorCode, 'BROKER_ERROR'>) {
    const requests: number[] = [];
    const client = {
      within: <T>(_what: string, work: () => Promise<T>) => work(),
      coordinatorOf: () => Promise.resolve(1),
      versionFor: () => Promise.reject(new ClusterRequestError(code, 'the words do not matter')),
      request: (_node: number, apiKey: number) => {
        requests.push(apiKey);
        return Promise.reject(new Error('not asked in this test'));
      },
    } as unknown as ClusterClient;
    return { client, requests };
  }

  test('UNSUPPORTED_API means no such groups there: not found, nothing asked', async () => {
    const { client, requests } = failingVersions('UNSUPPORTED_API');
    const lookups = new BrokerLookups(client);
    expect(await lookups.describeConsumerGroup('g')).toMatchObject({
      groupId: 'g',
      errorCode: ErrorCode.GROUP_ID_NOT_FOUND,
    });
    expect(await lookups.describeStreamsGroup('g')).toMatchObject({
      groupId: 'g',
      errorCode: ErrorCode.GROUP_ID_NOT_FOUND,
    });
    expect(requests).toEqual([]);
  });

  test('a broker that cannot be asked is no answer: the lookup fails with its code', async () => {
    for (const code of ['DISCONNECTED', 'TIMEOUT'] as const) {
      const lookups = new BrokerLookups(failingVersions(code).client);
      await expect(lookups.describeConsumerGroup('g')).rejects.toMatchObject({ code });
      await expect(lookups.describeStreamsGroup('g')).rejects.toMatchObject({ code });
    }
  });
});
