// Keeps records flowing into a topic (straight to the broker) so that a consumer under test has
// something to consume and new positions to commit all along.
import { Kafka, logLevel } from 'kafkajs';
import type { Producer } from 'kafkajs';

export class RecordFeeder {
  private stopped = false;
  private loop: Promise<void> | undefined;
  sent = 0;

  private constructor(private readonly producer: Producer) {}

  static async start(bootstrap: string, topics: string[], everyMs = 200): Promise<RecordFeeder> {
    const kafka = new Kafka({ clientId: 'record-feeder', brokers: [bootstrap], logLevel: logLevel.NOTHING });
    const producer = kafka.producer();
    await producer.connect();
    const feeder = new RecordFeeder(producer);
    feeder.loop = feeder.run(topics, everyMs);
    return feeder;
  }

  private async run(topics: string[], everyMs: number): Promise<void> {
    while (!this.stopped) {
      // Two records per topic each round: with the default partitioner both partitions get some.
      const messages = [0, 1].map((i) => ({ key: `k-${this.sent + i}`, value: `v-${this.sent + i}` }));
      try {
        await this.producer.sendBatch({ topicMessages: topics.map((topic) => ({ topic, messages })) });
        this.sent += messages.length;
      } catch {
        // The broker is not under test here; try again next round.
      }
      await new Promise((r) => setTimeout(r, everyMs));
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
    await this.producer.disconnect();
  }
}
