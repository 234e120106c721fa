// No more STALE_MEMBER_EPOCH through the proxy than directly (issue 39). franz-go's KIP-848 group
// tests once got 8-23 such refusals per run through the proxy where the broker gave 0-4: a
// churning group, commits racing the heartbeats that move member epochs. Here the same kind of
// sequence (test/bed/java/ChurnDriver.java: 8 member slots joining and leaving in waves while
// records are produced; auto-commit every 100 ms, commitAsync after every batch, commitSync every
// fourth batch and on revocation) runs at the same time directly against a broker and through the
// proxy (embedded store). A tap in front of each route decodes what every member was told
// (test/harness/commit-tally.ts): the OffsetCommit answers by error code, and STALE answers the
// broker's rule cannot have given, which neither route may give. Two coordinators: Kafka 4.4's,
// which accepts older epochs for partitions held since (KIP-1251), and Kafka 3.9's (the consumer
// protocol enabled), which compares epochs exactly, as the 4.1 broker of the issue did; against
// 4.4 the counts are compared too (kip848-routes.ts says why not against 3.9).
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { javaClient, type JavaClient } from '../bed/clients/java.js';
import { javaChurnClient, type ChurnResult, type JavaChurn } from '../bed/clients/java-churn.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import type { CommitTallyReport } from '../harness/commit-tally.js';
import {
  KAFKA_3_COORDINATOR,
  KAFKA_4_COORDINATOR,
  expectStaleAsDirect,
  ROUTES,
  startKip848Routes,
  type Kip848Routes,
  type Route,
} from '../harness/kip848-routes.js';

describe.each([KAFKA_4_COORDINATOR, KAFKA_3_COORDINATOR])(
  'KIP-848 group churn on Kafka $version: STALE_MEMBER_EPOCH through the proxy as the broker gives it',
  (c) => {
    const classpath = inject('kafkaClasspath');
    let routes: Kip848Routes;
    let java: JavaClient;
    let churn: JavaChurn;

    beforeAll(async () => {
      routes = await startKip848Routes(c);
      [java, churn] = await Promise.all([javaClient(classpath), javaChurnClient(classpath)]);
    });

    afterAll(async () => {
      await routes?.stop();
    });

    test('a churning group with racing commits gets no STALE_MEMBER_EPOCH the broker would not give', async () => {
      const runs = {} as Record<Route, ChurnResult>;
      await Promise.all(
        ROUTES.map(async (route) => {
          const target = { bootstrap: routes.targets[route] };
          const topic = uniqueName(`churn-${route}`);
          await java.createTopic(target, topic, 12);
          runs[route] = await churn(target, {
            topic,
            group: `${topic}-g`,
            records: 2400,
            waves: 5,
            waveMs: 3000,
          });
        }),
      );
      const reports = {} as Record<Route, CommitTallyReport>;
      for (const route of ROUTES) reports[route] = routes.tallies[route].report();
      console.info(
        `[churn] Kafka ${c.version}: ${ROUTES.map(
          (r) =>
            `${r}: ${runs[r].members} members, ${reports[r].commits} commits answered ${JSON.stringify(reports[r].byCode)}, ` +
            `STALE ${reports[r].stale} of ${reports[r].atRisk} at risk (unexplained ${reports[r].unexplainedStale}), client-side failures ` +
            JSON.stringify(runs[r].commitFailures),
        ).join('; ')}`,
      );
      for (const route of ROUTES) {
        const run = runs[route];
        // The sequence ran in full, and nothing was lost: every record processed, the group's
        // committed offsets at the end of every partition.
        expect(run.timedOut, route).toBe(false);
        expect(run.processed, route).toBe(run.produced);
        expect(run.committed, route).toEqual(run.ends);
        expect(reports[route].commits, route).toBeGreaterThan(100);
      }
      expectStaleAsDirect(c, routes, reports);
    }, 300_000);
  },
);
