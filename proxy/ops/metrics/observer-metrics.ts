/**
 * `ProxyObserver` backed by prom-client. The core calls it per frame and per socket chunk, so
 * every labelled child is created once and cached by a numeric key: the hot path does a Map
 * lookup and an increment, never builds a label object or a label string.
 */
import { Counter, Gauge, Histogram } from 'prom-client';
import type { Registry } from 'prom-client';
import type { AnsweredBy, ByteDirection, ProxyObserver, RejectCause } from '../../core/observer.js';
import { apiName } from './api-names.js';

/** Kafka requests take from sub-millisecond (local answers) to the Fetch long-poll (seconds). */
export const REQUEST_DURATION_BUCKETS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
];

const DIRECTIONS: readonly ByteDirection[] = ['client_in', 'client_out', 'broker_in', 'broker_out'];
const CAUSES: readonly RejectCause[] = ['too_large', 'malformed', 'unsupported_version', 'broker_protocol'];

type CounterChild = ReturnType<Counter['labels']>;

/** A child that exports 0 from the start, so rate() and alerts see the series before the first event. */
function zeroed(child: CounterChild): CounterChild {
  child.inc(0);
  return child;
}
type GaugeChild = ReturnType<Gauge['labels']>;
type HistogramChild = ReturnType<Histogram['labels']>;

export class ObserverMetrics implements ProxyObserver {
  private readonly requests: Counter<'api' | 'version' | 'answered_by'>;
  private readonly duration: Histogram<'api' | 'answered_by'>;
  /**
   * Keyed by (apiKey, version, answeredBy) packed into one number, with the responses counted
   * since the last scrape. prom-client hashes the label set on every inc(), even on a child (about
   * 0.4 µs a call), so the hot path only adds to plain numbers and `collect` (run at each scrape)
   * hands the sums over.
   */
  private readonly requestChildren = new Map<number, { child: CounterChild; pending: number }>();
  private readonly pendingBytes: Record<ByteDirection, number> = {
    client_in: 0,
    client_out: 0,
    broker_in: 0,
    broker_out: 0,
  };
  /** Keyed by (apiKey, answeredBy). */
  private readonly durationChildren = new Map<number, HistogramChild>();
  private readonly byteChildren: Record<ByteDirection, CounterChild>;
  private readonly rejectChildren: Record<RejectCause, CounterChild>;
  private readonly clientConnections: GaugeChild;
  private readonly brokerConnections: GaugeChild;
  private readonly upstreamFailures: Counter;

  constructor(
    registry: Registry,
    private readonly withVersions: boolean,
  ) {
    this.requests = new Counter({
      name: 'kop_requests_total',
      help: 'Responses sent to clients, by Kafka API, API version and who answered (proxy = offset store, broker = forwarded).',
      labelNames: ['api', 'version', 'answered_by'],
      registers: [registry],
      collect: () => {
        for (const entry of this.requestChildren.values()) {
          if (entry.pending === 0) continue;
          entry.child.inc(entry.pending);
          entry.pending = 0;
        }
      },
    });
    this.duration = new Histogram({
      name: 'kop_request_duration_seconds',
      help: 'Time from a request arriving at the proxy to its response leaving, by Kafka API and who answered.',
      labelNames: ['api', 'answered_by'],
      buckets: REQUEST_DURATION_BUCKETS,
      registers: [registry],
    });
    const bytes = new Counter({
      name: 'kop_bytes_total',
      help: 'Bytes read from or written to clients and brokers (client_in, client_out, broker_in, broker_out).',
      labelNames: ['direction'],
      registers: [registry],
      collect: () => {
        for (const d of DIRECTIONS) {
          if (this.pendingBytes[d] === 0) continue;
          this.byteChildren[d].inc(this.pendingBytes[d]);
          this.pendingBytes[d] = 0;
        }
      },
    });
    this.byteChildren = Object.fromEntries(DIRECTIONS.map((d) => [d, zeroed(bytes.labels(d))])) as Record<
      ByteDirection,
      CounterChild
    >;
    const rejected = new Counter({
      name: 'kop_frames_rejected_total',
      help: 'Frames that closed their connection, by cause (too_large, malformed, unsupported_version, broker_protocol).',
      labelNames: ['cause'],
      registers: [registry],
    });
    this.rejectChildren = Object.fromEntries(CAUSES.map((c) => [c, zeroed(rejected.labels(c))])) as Record<
      RejectCause,
      CounterChild
    >;
    const connections = new Gauge({
      name: 'kop_connections_active',
      help: 'Open connections: side="client" from Kafka clients, side="broker" the proxy holds to brokers for them (opened at a client\'s first request that needs the broker).',
      labelNames: ['side'],
      registers: [registry],
    });
    this.clientConnections = connections.labels('client');
    this.brokerConnections = connections.labels('broker');
    this.clientConnections.set(0);
    this.brokerConnections.set(0);
    this.upstreamFailures = new Counter({
      name: 'kop_upstream_connect_failures_total',
      help: 'Client connections closed because the proxy could not connect to their broker.',
      registers: [registry],
    });
  }

  connectionOpened(): void {
    this.clientConnections.inc();
  }

  connectionClosed(): void {
    this.clientConnections.dec();
  }

  // A client connection gets its own broker connection once it first needs the broker.
  brokerConnectionOpened(): void {
    this.brokerConnections.inc();
  }

  brokerConnectionClosed(): void {
    this.brokerConnections.dec();
  }

  upstreamConnectFailed(): void {
    this.upstreamFailures.inc();
  }

  responded(apiKey: number, apiVersion: number, answeredBy: AnsweredBy, seconds: number): void {
    const byProxy = answeredBy === 'proxy' ? 1 : 0;
    const version = this.withVersions ? apiVersion : 0;
    // apiKey < 2^15 and version < 2^15 as on the wire: the packed key is exact in a double.
    const requestKey = (apiKey * 32768 + version) * 2 + byProxy;
    let counter = this.requestChildren.get(requestKey);
    if (counter === undefined) {
      const child = this.requests.labels(
        apiName(apiKey),
        this.withVersions ? String(apiVersion) : '',
        answeredBy,
      );
      // Listed from the first response on, even before the first scrape adds to it.
      child.inc(0);
      counter = { child, pending: 0 };
      this.requestChildren.set(requestKey, counter);
    }
    counter.pending++;
    const durationKey = apiKey * 2 + byProxy;
    let histogram = this.durationChildren.get(durationKey);
    if (histogram === undefined) {
      histogram = this.duration.labels(apiName(apiKey), answeredBy);
      this.durationChildren.set(durationKey, histogram);
    }
    histogram.observe(seconds);
  }

  bytes(direction: ByteDirection, count: number): void {
    this.pendingBytes[direction] += count;
  }

  frameRejected(cause: RejectCause): void {
    this.rejectChildren[cause].inc();
  }
}
