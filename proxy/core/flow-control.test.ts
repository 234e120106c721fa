// Which side of a pair is read: the client's pause reasons as one state machine (paused once for
// its first reason, read again only when the last goes, never again once draining), and the
// broker held while the client cannot take its answers unless the client waits on the broker.
import { describe, expect, test } from 'vitest';
import { countingSide } from '../../test/harness/connection-parts.js';
import { FlowControl } from './flow-control.js';
import { CONNECTION_RESPONSE_BYTES, ResponseBacklog } from './response-backlog.js';

function flowBed() {
  const client = countingSide();
  const broker = countingSide();
  const backlog = new ResponseBacklog(null);
  const toClient = { clientFull: false };
  const flow = new FlowControl(client, broker, backlog, toClient);
  return { client, broker, backlog, toClient, flow };
}

describe('the client side', () => {
  test('paused once for its first reason, read again only when the last reason goes', () => {
    const { client, flow } = flowBed();
    flow.pause('upstream');
    flow.pause('inflight');
    flow.pause('upstream');
    expect(client.pauses).toBe(2);
    expect(flow.quiescent).toBe(false);
    flow.resume('upstream');
    expect(client.resumes).toBe(0);
    flow.resume('memory'); // not a reason it was paused for
    expect(client.resumes).toBe(0);
    flow.resume('inflight');
    expect(client.resumes).toBe(1);
    expect(client.paused).toBe(false);
    expect(flow.quiescent).toBe(true);
  });

  test('once draining it is not read again, whatever reason goes', () => {
    const { client, flow } = flowBed();
    flow.pause('memory');
    flow.startDraining();
    flow.resume('memory');
    expect(client.paused).toBe(true);
    flow.resumeAfterNative();
    expect(client.paused).toBe(true);
    expect(flow.quiescent).toBe(false);
  });

  test('update: --max-in-flight and unread responses come and go as reasons', () => {
    const { client, backlog, flow } = flowBed();
    flow.pause('inflight');
    flow.update(true, false);
    expect(client.paused).toBe(true);
    flow.update(false, false);
    expect(client.paused).toBe(false);
    backlog.addWaiting(CONNECTION_RESPONSE_BYTES);
    flow.update(false, true);
    expect(client.paused).toBe(true);
    backlog.addWaiting(-CONNECTION_RESPONSE_BYTES);
    flow.update(false, true);
    expect(client.paused).toBe(false);
  });
});

describe('the broker side', () => {
  test('held while the client socket is full, whatever the client waits for', () => {
    const { broker, toClient, flow } = flowBed();
    toClient.clientFull = true;
    flow.update(false, true);
    expect(broker.paused).toBe(true);
    expect(flow.quiescent).toBe(false);
    toClient.clientFull = false;
    flow.update(false, true);
    expect(broker.paused).toBe(false);
    expect(broker.pauses).toBe(1);
  });

  test('held at the response bound unless an answer from the broker is what the client waits for', () => {
    const { broker, backlog, flow } = flowBed();
    backlog.addWaiting(CONNECTION_RESPONSE_BYTES);
    flow.update(false, true);
    expect(broker.paused).toBe(false);
    flow.update(false, false);
    expect(broker.paused).toBe(true);
    // Paused and resumed only on a change.
    flow.update(false, false);
    expect(broker.pauses).toBe(1);
  });

  test('the native path suspends both sides and gives back only what nothing holds', () => {
    const { client, broker, backlog, flow } = flowBed();
    flow.suspendForNative();
    expect([client.paused, broker.paused]).toEqual([true, true]);
    backlog.addWaiting(CONNECTION_RESPONSE_BYTES);
    flow.update(false, false);
    flow.resumeAfterNative();
    expect(broker.paused).toBe(true);
    expect(client.paused).toBe(true);
  });
});
