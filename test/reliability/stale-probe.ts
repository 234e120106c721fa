// Reads the groups a CommitChecker commits, over and over, through another proxy than the one
// committing, and counts stale answers: an OffsetFetch answered with less than the offset that
// had been acknowledged before the fetch was sent. Two proxies on one store must answer as one
// (a consumer's next fetch may go to either); a store whose reads come from a replica that is
// behind (a ZooKeeper follower, a member cut off from the others) fails this.
import { RawClient } from '../harness/raw-client.js';
import { fetchOnce, sleep } from './commit-checker.js';
import type { CommitChecker } from './commit-checker.js';

export interface ProbeStats {
  /** Fetches answered without an error code. */
  answered: number;
  /** Partitions answered below what had been acknowledged before the fetch went out. */
  stale: number;
  /** The most a stale answer was behind, in offsets. */
  maxBehind: bigint;
  /** Error code -> fetches answered with it. */
  errors: Record<number, number>;
  /** Fetches with no answer within the timeout (the connection is dropped and made again). */
  unanswered: number;
  /** Connections that closed under the probe. */
  reconnects: number;
}

export class StaleProbe {
  readonly stats: ProbeStats = {
    answered: 0,
    stale: 0,
    maxBehind: 0n,
    errors: {},
    unanswered: 0,
    reconnects: 0,
  };
  private running = false;
  private done: Promise<void> = Promise.resolve();

  constructor(
    private readonly bootstrap: string,
    private readonly checker: CommitChecker,
    private readonly topic: string,
    private readonly partitions: number,
    private readonly timeoutMs = 5_000,
  ) {}

  start(): void {
    this.running = true;
    this.done = this.loop();
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.done;
  }

  /** Waits until `n` more fetches have been answered without an error, or throws after `timeoutMs`. */
  async waitForAnswers(n: number, timeoutMs = 60_000): Promise<void> {
    const target = this.stats.answered + n;
    const deadline = Date.now() + timeoutMs;
    while (this.stats.answered < target) {
      if (Date.now() > deadline)
        throw new Error(`only ${this.stats.answered} of ${target} fetches answered within ${timeoutMs} ms`);
      await sleep(50);
    }
  }

  summary(): string {
    const s = this.stats;
    return (
      `${s.answered} fetches answered, ${s.stale} stale partitions (at most ${s.maxBehind} behind), ` +
      `errors ${JSON.stringify(s.errors)}, ${s.unanswered} unanswered, ${s.reconnects} reconnects`
    );
  }

  private async loop(): Promise<void> {
    const groups = [...this.checker.tallies.keys()];
    let client: RawClient | null = null;
    for (let i = 0; this.running; i++) {
      if (client === null || client.hasClosed) {
        if (client !== null) this.stats.reconnects++;
        client = await RawClient.connect(this.bootstrap);
      }
      const group = groups[i % groups.length]!;
      const before = [...this.checker.tallies.get(group)!.acked];
      let timer: NodeJS.Timeout | undefined;
      try {
        const answer = await Promise.race([
          fetchOnce(client, group, this.topic, this.partitions),
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error('no answer')), this.timeoutMs);
          }),
        ]);
        if (answer.errorCode !== 0) {
          this.stats.errors[answer.errorCode] = (this.stats.errors[answer.errorCode] ?? 0) + 1;
          await sleep(50);
          continue;
        }
        this.stats.answered++;
        before.forEach((acked, p) => {
          const got = answer.offsets.get(p) ?? -1n;
          if (got >= acked) return;
          this.stats.stale++;
          if (acked - got > this.stats.maxBehind) this.stats.maxBehind = acked - got;
        });
      } catch {
        this.stats.unanswered++;
        client.close();
        client = null;
      } finally {
        clearTimeout(timer);
      }
    }
    client?.close();
  }
}
