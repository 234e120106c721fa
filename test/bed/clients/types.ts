// Shapes shared by every client helper of the bed, so that one scenario can run against any client.

export type SaslMechanism = 'PLAIN' | 'SCRAM-SHA-256' | 'SCRAM-SHA-512';

export interface SaslCredentials {
  /** PLAIN unless given. */
  mechanism?: SaslMechanism;
  username: string;
  password: string;
}

/** Where a client connects: a broker's bootstrap list, or later the proxy's. */
export interface ClientTarget {
  bootstrap: string;
  sasl?: SaslCredentials;
}

export interface ConsumedRecord {
  topic: string;
  partition: number;
  offset: number;
  key: string | null;
  value: string | null;
}

export interface CommittedOffset {
  topic: string;
  partition: number;
  /** The next offset to consume, as stored by the group coordinator. */
  offset: number;
}

export interface ConsumeResult {
  records: ConsumedRecord[];
  /** The group's committed offsets for the consumed topic when the consumer finished, sorted. */
  committed: CommittedOffset[];
  /** True if the deadline passed before `max` records arrived. */
  timedOut: boolean;
}

export interface ProduceResult {
  count: number;
  /** The partitions written to, ascending. */
  partitions: number[];
}

export interface ProduceOptions {
  topic: string;
  count: number;
  /** Number of the first record (default 0), so that a second batch continues the sequence. */
  start?: number;
}

export interface ConsumeOptions {
  topic: string;
  group: string;
  /** Stop after exactly this many records; records fetched beyond it are neither returned nor committed. */
  max: number;
  /** Give up (returning what arrived, timedOut=true) after this long. Default 30 s. */
  timeoutMs?: number;
}

/** What every client of the bed can do; the scenarios are written against this. */
export interface BedClient {
  readonly name: string;
  produce(target: ClientTarget, opts: ProduceOptions): Promise<ProduceResult>;
  consume(target: ClientTarget, opts: ConsumeOptions): Promise<ConsumeResult>;
}

// Record i of every produce helper has this key and value, whichever client wrote it.
export const recordKey = (i: number): string => `key-${i}`;
export const recordValue = (i: number): string => `value-${i}`;
/** Record i's value padded to `bytes` characters, as the Java driver's --value-bytes writes it. */
export const paddedRecordValue = (i: number, bytes: number): string => {
  const head = `value-${i}|`;
  return head + String.fromCharCode(97 + (i % 26)).repeat(Math.max(0, bytes - head.length));
};

export const DEFAULT_CONSUME_TIMEOUT_MS = 30_000;

export function sortCommitted(offsets: CommittedOffset[]): CommittedOffset[] {
  return [...offsets].sort((a, b) =>
    a.topic === b.topic ? a.partition - b.partition : a.topic < b.topic ? -1 : 1,
  );
}

/** A group's committed offset and the end offset of every partition of a topic it read, by partition. */
export interface CommittedAtEnds {
  committed: Record<string, number>;
  ends: Record<string, number>;
}
