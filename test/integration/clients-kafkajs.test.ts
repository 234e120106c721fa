// Baseline: kafkajs against the bed's single broker (no proxy in between).

import { describe, inject, test } from 'vitest';

import { kafkajsClient } from '../bed/clients/kafkajs.js';
import { commitStopResume, produceAndConsume } from '../bed/clients/scenarios.js';

describe.concurrent('kafkajs against the broker', () => {
  const target = { bootstrap: inject('kafkaBootstrap') };

  test('produces and consumes 1,000 records in a group', async () => {
    await produceAndConsume(kafkajsClient, target);
  });

  test('a group that commits, stops and resumes continues exactly where it left off', async () => {
    await commitStopResume(kafkajsClient, target);
  });
});
