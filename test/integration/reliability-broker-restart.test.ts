// Issue #7, faults: a broker of a 3-broker cluster SIGKILLed and restarted while a kafkajs group
// consumes and commits through the proxy, and raw clients commit increasing offsets for several
// groups (CommitChecker). Every record is produced before the fault (kafkajs's idempotent producer
// misbehaved on broker restarts in an earlier attempt): only consuming and committing run through
// it. At the end every acknowledged commit is in the store (or superseded), the group finished and
// its committed offsets are at the end of every partition.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { openStore } from '../../backends/open-store.js';
import { createTopics } from '../bed/clients/kafkajs.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { startKafka } from '../bed/kafka.js';
import type { KafkaCluster } from '../bed/kafka.js';
import { startOffsetProxy } from '../harness/offset-proxy.js';
import { pidOnPort } from '../reliability/chaos-faults.js';
import { CommitChecker, sleep } from '../reliability/commit-checker.js';
import { expectGroupCommitted, fill, storeReader, until } from '../reliability/fault-helpers.js';
import { runGroup } from '../reliability/group-consumers.js';

describe('a broker of a 3-broker cluster killed and restarted', () => {
  let cluster: KafkaCluster;
  beforeAll(async () => {
    cluster = await startKafka({ brokers: 3 });
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  test('a kafkajs group committing through the proxy loses no acknowledged commit and finishes', async () => {
    const store = await openStore('memory://');
    const proxy = await startOffsetProxy(cluster.bootstrap, store);
    const topic = uniqueName('broker-kill');
    await createTopics({ bootstrap: cluster.bootstrap }, [{ topic, partitions: 6, replicationFactor: 3 }]);
    // Everything is produced before the fault: only consuming and committing run through it.
    const ends = await fill(cluster.bootstrap, topic, 6, 100);
    const groups = Array.from({ length: 4 }, (_, i) => `${topic}-raw-${i}`);
    const checker = new CommitChecker({ target: () => proxy.bootstrap, groups, topic, partitions: 6 });
    const group = `${topic}-kafkajs`;
    const consumers = runGroup({
      bootstrap: proxy.bootstrap,
      topic,
      group,
      endOffsets: ends,
      perMessageMs: 25,
      timeoutMs: 100_000,
    });
    try {
      checker.start();
      await checker.waitForAcks(100);
      await until(() => consumers.seen().distinct >= 20, 'the kafkajs group consuming', 60_000);
      // The broker the proxy's bootstrap connections reach first is the one killed.
      const victim = cluster.brokers[0]!;
      const pid = pidOnPort(victim.port);
      const before = consumers.seen().distinct;
      if (pid !== undefined) process.kill(pid, 'SIGKILL');
      else await cluster.stopBroker(victim.nodeId);
      await sleep(3_000);
      await cluster.startBroker(victim.nodeId);
      await checker.waitForAcks(100, 60_000);
      await consumers.done;
      await checker.stop();
      const violations = await checker.verify(storeReader(store));
      console.log(
        `[faults] broker ${victim.nodeId} ${pid !== undefined ? 'SIGKILLed' : 'stopped'}: ${checker.summary()}; ` +
          `kafkajs: ${before} of 600 records seen before, ${JSON.stringify(consumers.seen())} at the end, ` +
          `${consumers.crashes} crashes, ${consumers.restarts} restarts, ${consumers.commitFailures} failed commits`,
      );
      expect(violations).toEqual([]);
      expect(before).toBeLessThan(600);
      await expectGroupCommitted(store, group, ends);
    } finally {
      await checker.stop();
      await consumers.stop();
      await proxy.stop();
      await store.close();
    }
  });

  test('the group coordinator moving to another broker: the group finishes and its offsets are all there', async () => {
    const store = await openStore('memory://');
    const proxy = await startOffsetProxy(cluster.bootstrap, store);
    const topic = uniqueName('coordinator-move');
    await createTopics({ bootstrap: cluster.bootstrap }, [{ topic, partitions: 6, replicationFactor: 3 }]);
    const ends = await fill(cluster.bootstrap, topic, 6, 100);
    const group = `${topic}-kafkajs`;
    const consumers = runGroup({
      bootstrap: proxy.bootstrap,
      topic,
      group,
      endOffsets: ends,
      perMessageMs: 25,
      timeoutMs: 100_000,
    });
    try {
      await until(() => consumers.seen().distinct >= 20, 'the kafkajs group consuming', 60_000);
      const coordinator = await proxy.offsets.cluster.coordinatorOf(group);
      // A controlled shutdown of the coordinator: the group's coordinator moves to another broker.
      await cluster.stopBroker(coordinator);
      let moved = coordinator;
      const deadline = Date.now() + 60_000;
      while (moved === coordinator && Date.now() < deadline) {
        moved = await proxy.offsets.cluster.coordinatorOf(group).catch(() => coordinator);
        if (moved === coordinator) await sleep(500);
      }
      await consumers.done;
      await cluster.startBroker(coordinator);
      console.log(
        `[faults] coordinator ${coordinator} stopped, moved to ${moved}: kafkajs ${JSON.stringify(consumers.seen())}, ` +
          `${consumers.crashes} crashes, ${consumers.restarts} restarts, ${consumers.commitFailures} failed commits`,
      );
      expect(moved).not.toBe(coordinator);
      await expectGroupCommitted(store, group, ends);
    } finally {
      await consumers.stop();
      await proxy.stop();
      await store.close();
    }
  });
});
