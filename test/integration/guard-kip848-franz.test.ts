// No more STALE_MEMBER_EPOCH through the proxy than directly, with the client of issue 39 itself:
// franz-go (pinned in test/bed/go/franzetl/go.mod) running its KIP-848 group ETL pattern
// (TestGroupETL: a chain of three groups, each consuming one topic, producing to the next and
// committing; members joining in two waves, some quitting at once or after a round or two without
// committing their last polls; autocommit, commits before rounds and on revocation racing the
// heartbeats that move member epochs). The same run goes at the same time directly against the
// bed's Kafka 4.4 broker and through the proxy (embedded store), each behind a tap whose
// CommitTally decodes what every member was told, as guard-kip848-churn does for the Java client.
//
// Kafka 4.4 only: franz-go runs KIP-848 groups only with ConsumerGroupHeartbeat v1 (Kafka 4.0+);
// against Kafka 3.9, which offers v0, its members fall back to the classic protocol.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  franzEtl,
  franzEtlBinary,
  type FranzEtlOptions,
  type FranzEtlResult,
} from '../bed/clients/franz-etl.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import type { CommitTallyReport } from '../harness/commit-tally.js';
import {
  expectStaleAsDirect,
  KAFKA_4_COORDINATOR,
  ROUTES,
  startKip848Routes,
  type Kip848Routes,
  type Route,
} from '../harness/kip848-routes.js';

const RECORDS = 20_000;

// franz-go's 848 cases: sticky/848 (uniform assignor, dynamic members) and sticky/848/static.
const CASES: (Pick<FranzEtlOptions, 'balancer' | 'static'> & { name: string })[] = [
  { name: 'sticky/848', balancer: 'sticky', static: false },
  { name: 'range/848/static', balancer: 'range', static: true },
];

describe('franz-go KIP-848 ETL groups on Kafka 4.4: STALE_MEMBER_EPOCH through the proxy as directly', () => {
  const c = KAFKA_4_COORDINATOR;
  let routes: Kip848Routes;

  beforeAll(async () => {
    [routes] = await Promise.all([startKip848Routes(c), franzEtlBinary()]);
  }, 600_000);

  afterAll(async () => {
    await routes?.stop();
  });

  test.each(CASES)(
    '$name: nothing lost, no STALE the broker would not give',
    async (etl) => {
      // Each case reads the tallies afresh: the taps see every case's traffic, but groups differ.
      const before = {} as Record<Route, CommitTallyReport>;
      for (const route of ROUTES) before[route] = routes.tallies[route].report();
      const runs = {} as Record<Route, FranzEtlResult>;
      await Promise.all(
        ROUTES.map(async (route) => {
          runs[route] = await franzEtl(
            { bootstrap: routes.targets[route] },
            {
              topicPrefix: uniqueName(`franz-${route}`),
              records: RECORDS,
              // Producing goes on through both waves, and autocommits come often, so that commits
              // meet epoch bumps (franz-go's test gets there with 500,000 records and 5 s).
              produceOverMs: 15_000,
              autoCommitMs: 200,
              ...etl,
            },
          );
        }),
      );
      const reports = {} as Record<Route, CommitTallyReport>;
      for (const route of ROUTES) reports[route] = since(before[route], routes.tallies[route].report());
      console.info(
        `[franz] Kafka ${c.version} ${etl.name}: ${ROUTES.map(
          (r) =>
            `${r}: ${runs[r].members} members, ${reports[r].commits} commits answered ${JSON.stringify(reports[r].byCode)}, ` +
            `STALE ${reports[r].stale} (unexplained ${reports[r].unexplainedStale}), duplicates ` +
            `${runs[r].levels.map((l) => l.duplicates).join('/')}, as franz-go saw them ${JSON.stringify(runs[r].commits)}`,
        ).join('; ')}`,
      );
      for (const route of ROUTES) {
        const run = runs[route];
        expect(run.timedOut, route).toBe(false);
        expect([run.produced, run.produceErrors], route).toEqual([RECORDS, 0]);
        for (const level of run.levels) {
          const what = `${route} ${level.group}`;
          expect([level.checkError, level.pollErrors, level.produceErrors], what).toEqual([undefined, [], 0]);
          // Nothing lost: every record of the level's input consumed, every key in its output,
          // and the group's committed offsets at the end of every partition.
          expect([level.consumed, level.outputKeys, level.missingKeys], what).toEqual([RECORDS, RECORDS, 0]);
          expect(level.committed, what).toEqual(level.ends);
        }
        // The members ran KIP-848 groups (no fallback to the classic protocol), and committed a lot.
        expect(reports[route].heartbeats, route).toBeGreaterThan(0);
        expect(reports[route].commits, route).toBeGreaterThan(100);
      }
      expectStaleAsDirect(c, routes, reports);
    },
    400_000,
  );
});

/** What a tally counted between two of its reports (examples: the later report's). */
function since(before: CommitTallyReport, after: CommitTallyReport): CommitTallyReport {
  const byCode: Record<number, number> = {};
  for (const [code, n] of Object.entries(after.byCode)) {
    const delta = n - (before.byCode[Number(code)] ?? 0);
    if (delta > 0) byCode[Number(code)] = delta;
  }
  return {
    byCode,
    commits: after.commits - before.commits,
    heartbeats: after.heartbeats - before.heartbeats,
    stale: after.stale - before.stale,
    atRisk: after.atRisk - before.atRisk,
    unexplainedStale: after.unexplainedStale - before.unexplainedStale,
    examples: after.examples.slice(before.examples.length),
  };
}
