/**
 * The proxy's own requests to the cluster (learning brokers at start, and later the offset
 * service's lookups): one connection, one request at a time, with a deadline.
 */
import net from 'node:net';
import tls from 'node:tls';
import { FrameSplitter } from '../../protocol/frame-splitter.js';
import { decodeResponseFrame, encodeRequestFrame } from '../../protocol/frames.js';
import type { HostPort } from '../core/broker-map.js';
import { PROXY_CLIENT_ID } from '../core/defaults.js';

export interface UpstreamTls {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  rejectUnauthorized: boolean;
  servername?: string;
}

export function connectUpstream(target: HostPort, tlsOptions: UpstreamTls | null): net.Socket {
  if (tlsOptions) {
    return tls.connect({
      host: target.host,
      port: target.port,
      ca: tlsOptions.ca,
      cert: tlsOptions.cert,
      key: tlsOptions.key,
      rejectUnauthorized: tlsOptions.rejectUnauthorized,
      servername: tlsOptions.servername ?? (net.isIP(target.host) ? undefined : target.host),
    });
  }
  return net.connect({ host: target.host, port: target.port });
}

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
