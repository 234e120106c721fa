// The commit guard decides as the broker's group coordinator would: the same scripted group
// requests, sent by raw protocol members once to the broker itself and once through the proxy on
// every store (memory, embedded, two instances sharing Redis, ZooKeeper), in lockstep, must get
// the same answer to every OffsetCommit and OffsetFetch and leave the same committed offsets.
// Named scripts cover the transitions of classic and KIP-848 groups (the first is issue #18);
// fast-check generates more, with members killed and their sessions timing out, and shrinks a
// difference to the shortest script that shows it. More scripts: `npm run diff:guard -- --runs N`.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, inject, test } from 'vitest';
import { createTopics } from '../bed/clients/kafkajs.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { DEFAULT_TIMING, expectSameAnswers, scriptArb } from '../harness/guard-differential.js';
import type { Env, Protocol } from '../harness/guard-differential.js';
import { GUARD_REGRESSIONS } from '../harness/guard-regressions.js';
import { startGuardTargets } from '../harness/guard-targets.js';
import type { GuardTargets } from '../harness/guard-targets.js';

/** Generated scripts per protocol in `npm test` (KOP_GUARD_DIFF_RUNS for more). */
const RUNS: Record<Protocol, number> = {
  classic: Number(process.env['KOP_GUARD_DIFF_RUNS'] ?? 8),
  consumer: Number(process.env['KOP_GUARD_DIFF_RUNS'] ?? 6),
};
const seed = process.env['KOP_GUARD_DIFF_SEED'] ? Number(process.env['KOP_GUARD_DIFF_SEED']) : undefined;

describe('commit guard vs the broker, differentially', () => {
  const broker = inject('kafkaBootstrap');
  let bed: GuardTargets;
  let env: Env;

  beforeAll(async () => {
    const topic = uniqueName('guard-diff');
    const otherTopic = `${topic}-other`;
    await createTopics({ bootstrap: broker }, [
      { topic, partitions: 2, replicationFactor: 1 },
      { topic: otherTopic, partitions: 2, replicationFactor: 1 },
    ]);
    env = { broker, topic, otherTopic, timing: DEFAULT_TIMING };
    bed = await startGuardTargets(broker, inject('redisUrl'), inject('zkConnect'));
  });
  afterAll(async () => {
    await bed?.stop();
  });

  for (const { title, script } of GUARD_REGRESSIONS) {
    test(title, async () => {
      await expectSameAnswers(bed.targets, script, env, 'named');
    });
  }

  for (const protocol of ['classic', 'consumer'] as const) {
    test(
      `${RUNS[protocol]} generated ${protocol} scripts: every answer as the broker's`,
      { timeout: 20 * 60_000 },
      async () => {
        await fc.assert(
          fc.asyncProperty(scriptArb(protocol), (script) =>
            expectSameAnswers(bed.targets, script, env, 'gen'),
          ),
          { numRuns: RUNS[protocol], ...(seed === undefined ? {} : { seed }) },
        );
      },
    );
  }
});
