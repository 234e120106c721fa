/**
 * The proxy's own one-off requests to the cluster (learning the brokers at start): one
 * connection, one request, with a deadline.
 */
import { FrameSplitter } from '../../protocol/frame-splitter.js';
import { decodeResponseFrame, encodeRequestFrame } from '../../protocol/frames.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { defaultMetadataRequest } from '../../protocol/messages/metadata-request.js';
import type { MetadataResponse } from '../../protocol/messages/metadata-response.js';
import { brokersIn } from '../core/address-rewrite.js';
import type { HostPort } from '../core/broker-map.js';
import { connectUpstream } from '../core/upstream-socket.js';
import type { UpstreamTls } from '../core/upstream-socket.js';
import { PROXY_CLIENT_ID } from '../core/defaults.js';

/** Sends one request and resolves with the decoded response body. */
export function requestOnce(
  target: HostPort,
  tlsOptions: UpstreamTls | null,
  apiKey: number,
  apiVersion: number,
  body: unknown,
  timeoutMs: number,
): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const socket = connectUpstream(target, tlsOptions);
    const splitter = new FrameSplitter({ maxFrameSize: 100 * 1024 * 1024 });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer from ${target.host}:${target.port} within ${timeoutMs} ms`));
    }, timeoutMs);
    const fail = (err: Error): void => {
      clearTimeout(timer);
      socket.destroy();
      reject(err);
    };
    socket.on('error', fail);
    socket.on('close', () => fail(new Error(`${target.host}:${target.port} closed the connection`)));
    socket.on('data', (chunk: Buffer) => {
      try {
        const frames = splitter.push(chunk);
        if (frames.length === 0) return;
        const { body: response } = decodeResponseFrame(frames[0]!, apiKey, apiVersion);
        clearTimeout(timer);
        socket.removeAllListeners('close');
        socket.destroy();
        resolve(response);
      } catch (err) {
        fail(err as Error);
      }
    });
    socket.write(
      encodeRequestFrame({ apiKey, apiVersion, correlationId: 1, clientId: PROXY_CLIENT_ID }, body),
    );
  });
}

/**
 * The cluster's brokers from an unauthenticated Metadata request to the first bootstrap server
 * that answers (a KafkaProxy's `discoverBrokers` where no authenticating client is at hand).
 */
export async function discoverBrokersAt(
  bootstrapServers: readonly HostPort[],
  tlsOptions: UpstreamTls | null,
  timeoutMs: number,
): Promise<{ nodeId: number; address: HostPort }[]> {
  let lastError: unknown;
  for (const target of bootstrapServers) {
    try {
      const body = (await requestOnce(
        target,
        tlsOptions,
        ApiKey.Metadata,
        1,
        { ...defaultMetadataRequest(), topics: [] },
        timeoutMs,
      )) as MetadataResponse;
      return brokersIn({ apiKey: ApiKey.Metadata, body });
    } catch (err) {
      lastError = err;
    }
  }
  throw lastError instanceof Error ? lastError : new Error('no bootstrap server answered');
}
