// The codec is generated from one pinned Kafka release's specs (protocol/spec/KAFKA_VERSION, written
// by `npm run protocol:update`), and it is the release the test bed runs as its newest broker: moving
// one without the other fails here.
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { KAFKA_VERSION } from '../bed/kafka.js';

describe('the pinned Kafka specs', () => {
  it("are the test bed's newest broker's", () => {
    const pinned = fs.readFileSync(new URL('../../protocol/spec/KAFKA_VERSION', import.meta.url), 'utf8');
    expect(pinned.trim()).toBe(KAFKA_VERSION);
  });
});
