// Streams groups (KIP-1071) are fenced as the broker fences them: the same StreamsGroupHeartbeat,
// OffsetCommit and OffsetFetch steps, from raw protocol members, sent to the broker itself and
// through the proxy on every store, get the same answer at every step (right, newer, older and
// unknown member epochs, an admin commit while the group has members and once it is empty). On
// the two proxy instances sharing Redis the commits go through the instance that did not see the
// heartbeats, so the broker's verdict (StreamsGroupDescribe) decides them there, the admin's
// anonymous commit too.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { ErrorCode } from '../../protocol/error-codes.js';
import { createTopics } from '../bed/clients/kafkajs.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { commitOffsets, Conn, fetchOffsets } from '../harness/group-members.js';
import { startGuardTargets } from '../harness/guard-targets.js';
import type { GuardTargets } from '../harness/guard-targets.js';
import { StreamsMember } from '../harness/streams-members.js';
import { expectSameStreamsAnswers, streamsScriptArb } from '../harness/streams-differential.js';
import fc from 'fast-check';

/** Generated streams-group scripts in `npm test` (KOP_GUARD_DIFF_RUNS for more). */
const GENERATED_RUNS = Number(process.env['KOP_GUARD_DIFF_RUNS'] ?? 5);
const seed = process.env['KOP_GUARD_DIFF_SEED'] ? Number(process.env['KOP_GUARD_DIFF_SEED']) : undefined;

const kafka4 = !(inject('kafkaVersion') ?? '').startsWith('3.');

/** Every step's name and its answer (the error codes), for one target. */
async function runScript(bootstraps: string[], group: string, topic: string): Promise<[string, unknown][]> {
  const beats = await Conn.open(bootstraps[0]!);
  // The last instance: on redis×2 not the one that saw the heartbeats.
  const commits = await Conn.open(bootstraps[bootstraps.length - 1]!);
  const steps: [string, unknown][] = [];
  const step = async (name: string, answer: Promise<unknown>) => steps.push([name, await answer]);
  const commit = (id: { memberId: string; epoch: number }, partitions: number[], version = 9) =>
    commitOffsets(
      commits,
      group,
      { generationIdOrMemberEpoch: id.epoch, memberId: id.memberId, groupInstanceId: null },
      topic,
      partitions,
      7n,
      version,
    );
  const fetch = (memberId: string | null, memberEpoch: number) =>
    fetchOffsets(commits, group, topic, [0, 1], { memberId, memberEpoch }).then((r) => r.errorCode);
  try {
    const a = new StreamsMember(beats, group, topic, randomUUID());
    await a.heartbeatUntil(2);
    const epoch = a.memberEpoch;
    const me = { memberId: a.memberId, epoch };
    await step('commit, member epoch', commit(me, [0, 1]));
    await step('commit, newer epoch', commit({ ...me, epoch: epoch + 1 }, [0]));
    await step('commit, unknown member', commit({ memberId: 'nobody', epoch }, [0]));
    await step('commit, v8', commit(me, [0], 8));
    // On redis×2 through the instance that never saw the group's heartbeats: the store's record
    // has no streams members, so the broker is asked (anonymous-clearance.ts).
    await step('commit, admin while members', commit({ memberId: '', epoch: -1 }, [0]));
    await step('fetch, member epoch', fetch(a.memberId, epoch));
    await step('fetch, older epoch', fetch(a.memberId, epoch - 1));
    await step('fetch, unknown member', fetch('nobody', epoch));
    await step('fetch, admin', fetch(null, -1));
    // A second member takes one of the two tasks: the first member's epoch moves on.
    const b = new StreamsMember(beats, group, topic, randomUUID());
    await b.heartbeat();
    for (let i = 0; i < 100 && !(a.partitions.length === 1 && b.partitions.length === 1); i++) {
      await a.heartbeat();
      await b.heartbeat();
      await new Promise((r) => setTimeout(r, 200));
    }
    steps.push(['tasks split', [a.partitions.length, b.partitions.length]]);
    const kept = a.partitions[0]!;
    const given = b.partitions[0]!;
    if (a.memberEpoch !== epoch) {
      // Kafka 4.3+: an older epoch commits the tasks held since it, not the ones given away.
      await step('commit, older epoch, task kept', commit(me, [kept]));
      await step('commit, older epoch, task given away', commit(me, [given]));
    }
    await step('commit, second member', commit({ memberId: b.memberId, epoch: b.memberEpoch }, [given]));
    await step('leave a', a.leave());
    await step('leave b', b.leave());
    await step('commit, left member', commit(me, [0]));
    await step('commit, admin once empty', commit({ memberId: '', epoch: -1 }, [0, 1]));
    await step(
      'fetch after all',
      fetchOffsets(commits, group, topic, [0, 1]).then((r) => [r.errorCode, r.offsets]),
    );
    return steps;
  } finally {
    beats.close();
    commits.close();
  }
}

describe.runIf(kafka4)('streams groups: the commit guard answers as the broker', () => {
  const broker = inject('kafkaBootstrap');
  let bed: GuardTargets;
  let topic: string;

  beforeAll(async () => {
    topic = uniqueName('streams-guard');
    await createTopics({ bootstrap: broker }, [{ topic, partitions: 2, replicationFactor: 1 }]);
    bed = await startGuardTargets(broker, inject('redisUrl'), inject('zkConnect'));
  }, 180_000);
  afterAll(async () => {
    await bed?.stop();
  });

  test(
    'every step of a streams group gets the broker answer on every store',
    { timeout: 15 * 60_000 },
    async () => {
      // Every target at once: each has a group of its own (as the generated sequences below).
      const answers = new Map<string, [string, unknown][]>(
        await Promise.all(
          bed.targets.map(
            async (target) =>
              [
                target.name,
                await runScript(target.bootstraps, uniqueName(`sg-${target.name}`), topic),
              ] as const,
          ),
        ),
      );
      const direct = answers.get('broker')!;
      // The script proves something only if the broker refuses what it should.
      expect(direct).toContainEqual(['commit, member epoch', [ErrorCode.NONE, ErrorCode.NONE]]);
      expect(direct).toContainEqual(['commit, newer epoch', [ErrorCode.STALE_MEMBER_EPOCH]]);
      expect(direct).toContainEqual(['commit, unknown member', [ErrorCode.UNKNOWN_MEMBER_ID]]);
      expect(direct).toContainEqual(['commit, admin while members', [ErrorCode.UNKNOWN_MEMBER_ID]]);
      expect(direct).toContainEqual(['tasks split', [1, 1]]);
      expect(direct.map(([name]) => name)).toContain('commit, older epoch, task given away');
      for (const [name, steps] of answers) expect({ name, steps }).toEqual({ name, steps: direct });
    },
  );

  test(
    `${GENERATED_RUNS} generated streams-group scripts: every answer as the broker's on every store`,
    { timeout: 20 * 60_000 },
    async () => {
      await fc.assert(
        fc.asyncProperty(streamsScriptArb(), (script) =>
          expectSameStreamsAnswers(bed.targets, script, { broker, topic }, 'sgen'),
        ),
        { numRuns: GENERATED_RUNS, ...(seed === undefined ? {} : { seed }) },
      );
    },
  );
});
