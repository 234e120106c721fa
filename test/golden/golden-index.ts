// The shape of test/golden/frames/index.json, written by record/record.ts and read by the test.

export interface GoldenEntry {
  /** kafkajs, kafkajs-admin, java-classic, java-consumer (the Java client of the broker's version), kcat,
   *  kcat-acks0, python, kafka-tools (ConsumerGroupCommand of the broker's version). */
  client: string;
  /** The broker's Kafka version. */
  broker: string;
  apiKey: number;
  /** The codec's name of the API (getApiCodec(apiKey).name). */
  api: string;
  version: number;
  /** Paths relative to test/golden/frames/: the frame without its 4-byte size prefix. */
  request: string;
  /** Null for Produce with acks=0. ApiVersions responses are as the broker sent them (uncapped). */
  response: string | null;
  /** host:port the broker advertised (the relay's). */
  advertised: string;
  /** True if every errorCode in the decoded response is 0 (the recorder prefers such pairs). */
  errorFree: boolean;
  /** Set when the codec could not decode the pair at recording time. */
  decodeError?: string;
}

export interface GoldenIndex {
  recordedWith: string;
  /** Records produced to each topic of the recording (committed offsets lie in 0..count). */
  producedPerTopic: Record<string, number>;
  /** The offset kafka-tools (reset) and kafkajs-admin (setOffsets) commit; consumers commit the record count. */
  adminCommitOffset: number;
  entries: GoldenEntry[];
}
