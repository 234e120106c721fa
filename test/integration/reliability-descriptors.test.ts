// Issue #43, descriptors running out while the Redis store client and the proxy's own cluster
// connection (its metadata and readiness requests to the broker) must reconnect, two ways
// (test/reliability/descriptor-exhaustion.ts): the proxy's own limit (EMFILE, prlimit on the
// running CLI proxy) and the system's file table (ENFILE, fs.file-max lowered below what is open,
// the proxy started without CAP_SYS_ADMIN so that the kernel holds it to the table). Both need
// root, as CI runs. Asserted, for each: probes on a kept-alive connection and an existing client
// keep being answered (the store's failure as an error code), the store client cannot reconnect
// meanwhile, and once descriptors are free the proxy reconnects both by itself and serves new
// clients. Behaviour, never speed (the times are logged).
import { beforeAll, describe, expect, inject, test } from 'vitest';
import { readdirSync } from 'node:fs';
import { createTopics } from '../bed/clients/kafkajs.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { commitsAndFetches, probesAnswer } from '../harness/limits-checks.js';
import { ensureBuilt } from '../harness/proxy.js';
import { RawClient, splitHostPort } from '../harness/raw-client.js';
import { commitOnce, fetchOnce, sleep } from '../reliability/commit-checker.js';
import { filesOpen, hasSysAdmin, processLimit, systemTable } from '../reliability/descriptor-exhaustion.js';
import { until } from '../reliability/fault-helpers.js';
import {
  cliWithMetrics,
  closeProbes,
  fmt,
  keptAliveProbes,
  latencies,
  openProbes,
  resetSockets,
  roundTrips,
  socketsOf,
  socketsTo,
  tally,
} from '../reliability/limits-helpers.js';
import type { Probe } from '../reliability/limits-helpers.js';

const brokerBootstrap = inject('kafkaBootstrap');
const brokerPort = splitHostPort(brokerBootstrap.split(',')[0]!)[1];

let topic: string;
beforeAll(async () => {
  await ensureBuilt();
  topic = uniqueName('limits-fd');
  await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 1 }]);
});

describe('descriptors exhausted while the store client and the cluster connection must reconnect', () => {
  test.each([
    ["the process's limit (EMFILE)", processLimit],
    ["the system's file table (ENFILE)", systemTable],
  ])(
    'Redis store, %s: probes and an existing client answered, both reconnect by themselves once descriptors are free',
    async (_, how) => {
      const exhaustion = how();
      const redisUrl = inject('redisUrl');
      const redisPort = Number(new URL(redisUrl).port);
      const { proxy, http } = await cliWithMetrics(
        brokerBootstrap,
        ['--store', redisUrl],
        exhaustion.launcher,
      );
      const pid = proxy.child.pid!;
      // The system's table binds only processes without CAP_SYS_ADMIN: the proxy must lack it.
      expect(hasSysAdmin(pid), 'CAP_SYS_ADMIN').toBe(exhaustion.code === 'EMFILE');
      let kept: RawClient | undefined;
      let storm: Probe[] = [];
      const probes = keptAliveProbes(http);
      try {
        // A first client's commit and the readiness checks open the cluster client's connections
        // (topic lookup, the broker check); once that client is gone, the proxy's broker
        // connections are the cluster client's alone.
        const first = await RawClient.connect(proxy.bootstrap);
        await roundTrips(first, 1);
        await commitsAndFetches(first, topic, 1n);
        first.close();
        await probesAnswer(http);
        await until(
          () => socketsTo(pid, brokerPort).length <= 2,
          "the first client's broker connection closed",
          10_000,
        );
        const clusterPorts = socketsTo(pid, brokerPort);
        const storePorts = socketsTo(pid, redisPort);
        expect(clusterPorts.length, 'the cluster client is connected').toBeGreaterThan(0);
        expect(storePorts.length, 'the store client is connected').toBeGreaterThan(0);
        // The existing client, with its own broker connection (relayed), which stays.
        kept = await RawClient.connect(proxy.bootstrap);
        await roundTrips(kept, 2);
        await commitsAndFetches(kept, topic, 2n);
        const keptPorts = socketsTo(pid, brokerPort).filter((p) => !clusterPorts.includes(p));
        expect(keptPorts.length).toBe(1);

        // Descriptors run out: the soft limit set to what is open now plus 20, then filled by
        // connections that send nothing (the rest of them libuv accepts and closes); or the
        // system's table full, where libuv cannot accept at all (the connections wait in the
        // listen backlog).
        const fds = readdirSync(`/proc/${pid}/fd`).length;
        exhaustion.exhaust(pid, 20);
        const systemFiles = filesOpen();
        storm = await openProbes(proxy.bootstrap, 200, () => undefined, 30_000);
        await sleep(1_000);
        const filled = tally(storm);
        const atLimit = readdirSync(`/proc/${pid}/fd`).length;
        // Both must reconnect now: their connections reset, as a network blip or a restart would.
        // Closing them frees their descriptors, which the reconnects would take at once: those
        // stay taken (exhaustion.keepClosedTaken), as when something else grabbed them first.
        const storeToReset = socketsOf(pid, redisPort);
        const clusterToReset = socketsOf(pid, brokerPort).filter((s) => clusterPorts.includes(s.port));
        exhaustion.keepClosedTaken(pid, Math.min(...[...storeToReset, ...clusterToReset].map((s) => s.fd)));
        const answersFrom = probes.answers.length;
        resetSockets(
          storeToReset.map((s) => s.port),
          redisPort,
        );
        resetSockets(
          clusterToReset.map((s) => s.port),
          brokerPort,
        );
        await sleep(3_000);
        // Meanwhile the existing client: Metadata on its own broker connection; a commit and a
        // fetch, which need the store: answered (an error code while the store is unreachable).
        const during = latencies(await roundTrips(kept, 5));
        const group = uniqueName('limits-fd-g');
        const commitCodes = await commitOnce(kept, group, topic, 1, 5n);
        const fetchCode = (await fetchOnce(kept, group, topic, 1)).errorCode;
        const duringProbes = probes.since(answersFrom);
        const storeSockets = socketsTo(pid, redisPort).length;
        const logged = (proxy.output().match(new RegExp(exhaustion.code, 'g')) ?? []).length;
        // Which log events named it, each once.
        const sayers = [
          ...new Set(
            proxy
              .output()
              .split('\n')
              .filter((l) => l.includes(exhaustion.code))
              .map((l) => /"event":"([^"]*)"/.exec(l)?.[1] ?? l.slice(0, 80)),
          ),
        ];
        console.log(
          `[descriptors] ${exhaustion.code}: ${fds} open before, ${atLimit} at the limit (${systemFiles} files open ` +
            `in the system); ${filled.open} of 200 new connections held, ${filled.closed} closed at accept; store ` +
            `and cluster connections reset: probes ${JSON.stringify(duringProbes.got.map((a) => `${a.path} ${a.status}`).slice(-4))}, ` +
            `store connections ${storeSockets}, ${exhaustion.code} logged ${logged} times (${JSON.stringify(sayers)}); existing client ` +
            `p50/p99/max ${fmt(during)} ms, commit ${JSON.stringify(commitCodes)}, fetch ${fetchCode}`,
        );
        expect(proxy.child.exitCode).toBe(null);
        if (exhaustion.code === 'EMFILE') {
          expect(atLimit).toBeGreaterThanOrEqual(fds + 19);
          expect(filled.closed).toBeGreaterThan(0);
        } else {
          // Nothing accepted: the proxy holds no more descriptors than before the storm.
          expect(atLimit).toBeLessThanOrEqual(fds);
        }
        expect(logged, `${exhaustion.code} in the log`).toBeGreaterThan(0);
        expect(storeSockets, 'the store client could not reconnect').toBe(0);
        expect(duringProbes.got.length).toBeGreaterThan(0);
        expect(duringProbes.errors).toEqual([]);
        expect(duringProbes.got.filter((a) => a.path === '/healthz').every((a) => a.status === 200)).toBe(
          true,
        );
        expect(commitCodes).toHaveLength(1);

        // Descriptors free again: the store client and the cluster client reconnect by themselves,
        // /readyz (which asks both) answers 200 again, and the commits go through.
        exhaustion.free(pid);
        closeProbes(storm);
        await until(() => storm.every((p) => p.closed), 'the filler connections closed', 30_000);
        const freed = Date.now();
        let isReady = false;
        while (!isReady && Date.now() - freed < 90_000) {
          const last = probes.answers.findLast((a) => a.path === '/readyz');
          isReady = last?.status === 200 && socketsTo(pid, redisPort).length > 0;
          if (!isReady) await sleep(500);
        }
        expect(isReady, 'ready again with a store connection').toBe(true);
        const readyS = (Date.now() - freed) / 1000;
        await commitsAndFetches(kept, topic, 6n);
        // A commit to a topic the cluster does not have is refused (UNKNOWN_TOPIC_OR_PARTITION) only
        // when the cluster client answered the topic lookup: without an answer it lets it through.
        expect(await commitOnce(kept, uniqueName('limits-fd-g'), uniqueName('no-such-topic'), 1, 1n)).toEqual(
          [3],
        );
        const fresh = await RawClient.connect(proxy.bootstrap);
        try {
          await commitsAndFetches(fresh, topic, 7n);
        } finally {
          fresh.close();
        }
        console.log(
          `[descriptors] ${exhaustion.code}: ready again ${readyS.toFixed(1)} s after descriptors were free`,
        );
      } finally {
        exhaustion.free(pid);
        closeProbes(storm);
        await probes.stop();
        kept?.close();
        await proxy.stop('SIGKILL');
      }
    },
    300_000,
  );
});
