// No more STALE_MEMBER_EPOCH through the proxy than directly (issue 39). franz-go's KIP-848 group
// tests once got 8-23 such refusals per run through the proxy where the broker gave 0-4: a
// churning group, commits racing the heartbeats that move member epochs. Here the same kind of
// sequence (test/bed/java/ChurnDriver.java: 8 member slots joining and leaving in waves while
// records are produced; auto-commit every 100 ms, commitAsync after every batch, commitSync every
// fourth batch and on revocation) runs at the same time directly against a broker and through the
// proxy (embedded store). A tap in front of each route decodes what every member was told
// (test/harness/commit-tally.ts): the OffsetCommit answers by error code, and STALE answers the
// broker's rule cannot have given. Two coordinators: Kafka 4.4's, which accepts older epochs for
// partitions held since (KIP-1251), and Kafka 3.9's (the consumer protocol enabled), which
// compares epochs exactly, as the 4.1 broker of the issue did.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { EmbeddedStore } from '../../backends/embedded-store.js';
import { javaClient, type JavaClient } from '../bed/clients/java.js';
import { javaChurnClient, type ChurnResult, type JavaChurn } from '../bed/clients/java-churn.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { freePortWithCompanion } from '../bed/ports.js';
import { KAFKA_COMPAT_VERSION, KAFKA_VERSION, startKafka, type KafkaCluster } from '../bed/kafka.js';
import { CommitTally, type CommitTallyReport } from '../harness/commit-tally.js';
import { RequestTap } from '../harness/request-tap.js';
import { refusalTolerance } from '../harness/refusal-tolerance.js';
import { startTappedProxy, type TappedProxy } from '../harness/tapped-proxy.js';

type Route = 'direct' | 'proxy';
const ROUTES: Route[] = ['direct', 'proxy'];

/**
 * How many more STALE_MEMBER_EPOCH answers the proxy may give than the broker gave directly in the
 * same run (refusal-tolerance.ts). The two groups run side by side but not in lockstep: which commits meet which epoch
 * bump depends on thread scheduling at load average 10 and more, so either side's count varies
 * from run to run like a count of rare events (against 3.9, direct/proxy 10/6, 16/14, 3/2, 5/8,
 * 3/5 and 1/1; against 4.4, 0/0 every time). The tolerance, 5 and half the direct count, is wider
 * than any excess seen (3) so that npm test does not fail on noise at load average 10; most of the
 * issue's runs (8 to 23 through the proxy against 0 to 4 directly) still exceed it. Against 4.4
 * the per-commit check below is the sharp one.
 */
const staleTolerance = refusalTolerance;

interface Coordinator {
  version: string;
  /** Kafka 4.3+ accepts older epochs per partition (KIP-1251): then every STALE answer is explained. */
  assignmentEpochs: boolean;
  /** More broker settings; null: the bed's shared broker (through its tapped listener). */
  serverProperties: string[] | null;
}

const COORDINATORS: Coordinator[] = [
  { version: KAFKA_VERSION, assignmentEpochs: true, serverProperties: null },
  {
    version: KAFKA_COMPAT_VERSION,
    assignmentEpochs: false,
    // Kafka 3.9 runs KIP-848 groups only when asked to.
    serverProperties: ['group.coordinator.rebalance.protocols=classic,consumer'],
  },
];

describe.each(COORDINATORS)(
  'KIP-848 group churn on Kafka $version: STALE_MEMBER_EPOCH through the proxy as directly',
  (c) => {
    const classpath = inject('kafkaClasspath');
    let ownBroker: KafkaCluster | undefined;
    let dir: string;
    let store: EmbeddedStore;
    let direct: RequestTap;
    let proxy: TappedProxy;
    let java: JavaClient;
    let churn: JavaChurn;
    const tallies = {} as Record<Route, CommitTally>;
    const targets = {} as Record<Route, string>;

    beforeAll(async () => {
      let brokerBootstrap = inject('kafkaBootstrap');
      let tapped = c.serverProperties === null ? inject('kafkaTappedListener') : null;
      if (tapped === null) {
        // A broker of the test's own (another version, or an external cluster without a tapped
        // listener), with a listener advertised at the tap's port.
        const port = await freePortWithCompanion(1);
        tapped = { port, advertisedPort: port + 1 };
        ownBroker = await startKafka({
          version: c.version,
          extraListeners: [{ name: 'TAPPED', ...tapped }],
          serverProperties: c.serverProperties ?? [],
        });
        brokerBootstrap = ownBroker.bootstrap;
      }
      direct = new RequestTap();
      tallies.direct = new CommitTally(direct);
      await direct.listen(
        { host: '127.0.0.1', port: tapped.advertisedPort },
        { host: '127.0.0.1', port: tapped.port },
      );
      targets.direct = `127.0.0.1:${tapped.advertisedPort}`;
      dir = mkdtempSync(path.join(os.tmpdir(), 'kop-churn-'));
      store = new EmbeddedStore({ dataDir: dir });
      proxy = await startTappedProxy(brokerBootstrap, store);
      tallies.proxy = new CommitTally(proxy.tap);
      targets.proxy = proxy.bootstrap;
      [java, churn] = await Promise.all([javaClient(classpath), javaChurnClient(classpath)]);
    });

    afterAll(async () => {
      await direct?.close();
      await proxy?.stop();
      await store?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
      await ownBroker?.stop();
    });

    test('a churning group with racing commits gets no more STALE_MEMBER_EPOCH than directly', async () => {
      const runs = {} as Record<Route, ChurnResult>;
      await Promise.all(
        ROUTES.map(async (route) => {
          const target = { bootstrap: targets[route] };
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
      for (const route of ROUTES) reports[route] = tallies[route].report();
      console.info(
        `[churn] Kafka ${c.version}: ${ROUTES.map(
          (r) =>
            `${r}: ${runs[r].members} members, ${reports[r].commits} commits answered ${JSON.stringify(reports[r].byCode)}, ` +
            `STALE ${reports[r].stale} (unexplained ${reports[r].unexplainedStale}), client-side failures ` +
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
      expect(direct.undecoded + proxy.tap.undecoded).toBe(0);
      if (c.assignmentEpochs) {
        // The tally's rule is the broker's: the broker itself never breaks it ...
        expect(reports.direct.unexplainedStale, reports.direct.examples.join('\n')).toBe(0);
        // ... and neither does the proxy: no refusal where the broker's rule accepts.
        expect(reports.proxy.unexplainedStale, reports.proxy.examples.join('\n')).toBe(0);
      }
      // In all, no more STALE_MEMBER_EPOCH than directly, but for timing noise.
      expect(reports.proxy.stale).toBeLessThanOrEqual(
        reports.direct.stale + staleTolerance(reports.direct.stale),
      );
    }, 300_000);
  },
);
