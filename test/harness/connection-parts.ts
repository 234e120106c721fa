// A stand-in for the connection that holds the parts of proxy/core/connection.ts, for unit tests
// of one part at a time: it records what the part asks of it.
import type { ConnectionHost, RequestKey } from '../../proxy/core/connection-parts.js';
import type { RequestInfo } from '../../proxy/core/extension.js';

export interface RecordingHost extends ConnectionHost {
  closed: boolean;
  /** Why it was closed, and with what. */
  closes: { reason: string; detail: unknown }[];
  flowUpdates: number;
  nativeTries: number;
  activity: number;
}

export function recordingHost(): RecordingHost {
  const host: RecordingHost = {
    closed: false,
    closes: [],
    flowUpdates: 0,
    nativeTries: 0,
    activity: 0,
    close(reason, detail) {
      host.closes.push({ reason, detail });
      host.closed = true;
    },
    updateFlow() {
      host.flowUpdates++;
    },
    maybeNative() {
      host.nativeTries++;
    },
    active() {
      host.activity++;
    },
    requestInfo(h: RequestKey): RequestInfo {
      return { connectionId: 'c-test', ...h, nodeId: null };
    },
  };
  return host;
}

/** A side that counts pauses and resumes, as a socket's reading would. */
export function countingSide(): {
  pause(): void;
  resume(): void;
  paused: boolean;
  pauses: number;
  resumes: number;
} {
  const side = {
    paused: false,
    pauses: 0,
    resumes: 0,
    pause() {
      side.paused = true;
      side.pauses++;
    },
    resume() {
      side.paused = false;
      side.resumes++;
    },
  };
  return side;
}
