// Baseline: librdkafka through kcat 1.7 and python confluent-kafka 1.7, against the bed's single
// broker (no proxy in between).

import { describe, expect, inject, test } from 'vitest';

import { kafkajsClient } from '../bed/clients/kafkajs.js';
import { kcatClient } from '../bed/clients/kcat.js';
import { committedOffsets, pythonClient } from '../bed/clients/python.js';
import { commitStopResume, produceAndConsume } from '../bed/clients/scenarios.js';

describe.concurrent('librdkafka clients against the broker', () => {
  const target = { bootstrap: inject('kafkaBootstrap') };

  test('kcat: produces and consumes 1,000 records in a balanced group', async () => {
    await produceAndConsume(kcatClient, target);
  });

  test('kcat: commit, stop, resume exactly where it left off', async () => {
    await commitStopResume(kcatClient, target);
  });

  test('python: produces and consumes 1,000 records in a group', async () => {
    await produceAndConsume(pythonClient, target);
  });

  test('python: commit, stop, resume exactly where it left off', async () => {
    await commitStopResume(pythonClient, target);
  });

  test('offsets committed by one client are resumed by another (python -> kafkajs), and librdkafka reads them', async () => {
    const report = await commitStopResume(pythonClient, target, { resumeWith: kafkajsClient, count: 300 });
    const committed = await committedOffsets(target, report.group, report.topic);
    // 300 records plus the 10 of the final batch, all consumed and committed.
    expect(committed.reduce((sum, c) => sum + c.offset, 0)).toBe(310);
  });
});
