// Checks the limits tests make again and again: the probes answer, a commit is read back.
import { expect } from 'vitest';
import { uniqueName } from '../bed/clients/scenarios.js';
import { commitOnce, fetchOnce } from '../reliability/commit-checker.js';
import type { RawClient } from './raw-client.js';

/** /healthz and /readyz answer 200 on fresh connections. */
export async function probesAnswer(httpAddress: string): Promise<void> {
  for (const path of ['/healthz', '/readyz']) {
    const res = await fetch(`http://${httpAddress}${path}`, { signal: AbortSignal.timeout(30_000) });
    expect(res.status, `${path}: ${await res.text()}`).toBe(200);
  }
}

/** A commit to partition 0 of `topic` and its read-back on `client`. */
export async function commitsAndFetches(client: RawClient, topic: string, offset: bigint): Promise<void> {
  const group = uniqueName('limits-g');
  expect(await commitOnce(client, group, topic, 1, offset)).toEqual([0]);
  expect((await fetchOnce(client, group, topic, 1)).offsets.get(0)).toBe(offset);
}
