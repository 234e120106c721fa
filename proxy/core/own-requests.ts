/**
 * Requests of the proxy's own on a client's broker connection (ConnectionHost.requestInfo's
 * askBroker), so the broker answers them for the client's authenticated principal (authorization
 * probes). Negative correlation ids keep them apart from the client's requests; their answers stay
 * here. Each fails after its deadline without an answer (the answer, if it comes later, is read
 * and dropped: the broker answers in order).
 */
import { decodeResponseFrame, encodeRequestFrame } from '../../protocol/frames.js';
import type { RequestBody, ResponseBody } from '../../protocol/messages/api-info.js';
import type { BrokerWrites } from './broker-writes.js';
import type { ConnectionHost, Quiescent } from './connection-parts.js';
import { PROXY_CLIENT_ID } from './defaults.js';
import type { ProxyObserver } from './observer.js';
import type { OwnRequest, ResponseQueue } from './response-queue.js';

/** The lowest correlation id given out before counting down from -1 again. */
const LOWEST_ID = -0x7ffffff0;

export class OwnRequests implements Quiescent {
  private nextId = -1;
  /** Asked and neither answered, failed nor timed out. */
  private inFlight = 0;

  constructor(
    private readonly host: ConnectionHost,
    private readonly queue: Pick<ResponseQueue, 'sent'>,
    private readonly writes: Pick<BrokerWrites, 'write'>,
    private readonly observer: ProxyObserver,
    private readonly timeoutMs: number,
  ) {}

  /** A request of the proxy's own awaits the broker: its answer must be read even while answers wait for the client. */
  get waiting(): boolean {
    return this.inFlight > 0;
  }

  get quiescent(): boolean {
    return this.inFlight === 0;
  }

  /** Sends the request on the broker connection (JavaScript's: see NativeHandover.takeBack). */
  ask<K extends number>(apiKey: K, apiVersion: number, body: RequestBody<K>): Promise<ResponseBody<K>> {
    const correlationId = this.nextId;
    this.nextId = this.nextId <= LOWEST_ID ? -1 : this.nextId - 1;
    const timeoutMs = this.timeoutMs;
    return new Promise((resolve, reject) => {
      let settled = false;
      const settle = (): boolean => {
        if (settled) return false;
        settled = true;
        clearTimeout(timer);
        this.inFlight--;
        return true;
      };
      const timer = setTimeout(() => {
        if (!settle()) return;
        reject(new Error(`the broker did not answer api ${apiKey} within ${timeoutMs} ms`));
        this.host.updateFlow();
      }, timeoutMs);
      const own: OwnRequest = {
        kind: 'own',
        correlationId,
        onLost: (err) => {
          if (settle()) reject(err);
        },
        onResponse: (frame) => {
          if (!settle()) return;
          try {
            resolve(decodeResponseFrame(frame, apiKey, apiVersion).body);
          } catch (err) {
            reject(err instanceof Error ? err : new Error(String(err)));
          }
        },
      };
      this.inFlight++;
      this.queue.sent(own);
      const frame = encodeRequestFrame(
        { apiKey, apiVersion, correlationId, clientId: PROXY_CLIENT_ID },
        body,
      );
      this.observer.bytes('broker_out', frame.length);
      this.writes.write([frame]);
      // Its answer must be read even while answers wait for the client.
      this.host.updateFlow();
    });
  }
}
