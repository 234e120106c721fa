// Shared pieces of the fault tests (test/integration/reliability-*.test.ts).
import { Kafka, logLevel } from 'kafkajs';
import { expect } from 'vitest';
import type { OffsetStore } from '../../backends/store.js';
import { sleep } from './commit-checker.js';

/** Produces `perPartition` small records to every partition (idempotent producer, before any fault). */
export async function fill(bootstrap: string, topic: string, partitions: number, perPartition: number) {
  const kafka = new Kafka({
    clientId: 'reliability-fill',
    brokers: bootstrap.split(','),
    logLevel: logLevel.NOTHING,
  });
  const producer = kafka.producer({
    idempotent: true,
    maxInFlightRequests: 1,
    allowAutoTopicCreation: false,
  });
  await producer.connect();
  try {
    for (let p = 0; p < partitions; p++) {
      await producer.send({
        topic,
        acks: -1,
        messages: Array.from({ length: perPartition }, (_, i) => ({ partition: p, value: `r-${p}-${i}` })),
      });
    }
  } finally {
    await producer.disconnect();
  }
  return new Map(Array.from({ length: partitions }, (_, p) => [p, perPartition] as [number, number]));
}

export async function until(cond: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** Reads `group`'s offsets from a store as partition -> offset. */
export function storeReader(store: OffsetStore) {
  return async (group: string) => {
    const offsets = await store.fetch(group, null);
    return new Map(offsets.map((o) => [o.partition, BigInt(o.offset)]));
  };
}

export async function expectGroupCommitted(store: OffsetStore, group: string, ends: Map<number, number>) {
  const stored = await storeReader(store)(group);
  for (const [p, end] of ends) expect(stored.get(p), `${group} partition ${p}`).toBe(BigInt(end));
}
