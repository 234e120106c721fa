import net from 'node:net';
import { afterEach, describe, expect, test } from 'vitest';
import { silentLogger } from '../common/log.js';
import { BrokerListeners, ListenError } from './broker-listeners.js';

const opened: net.Server[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((s) => new Promise((r) => s.close(r))));
});

async function busyPort(): Promise<number> {
  const s = net.createServer();
  opened.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return (s.address() as net.AddressInfo).port;
}

function listeners(ports: Map<number, number>) {
  const created: number[] = [];
  const bound: number[] = [];
  const l = new BrokerListeners({
    host: '127.0.0.1',
    localPort: (n) => ports.get(n)!,
    option: () => 'broker-port',
    create: (n) => {
      created.push(n);
      const s = net.createServer();
      opened.push(s);
      return s;
    },
    bound: (n) => bound.push(n),
    log: silentLogger,
  });
  return { l, created, bound };
}

describe("the proxy's listener per broker", () => {
  test('opens one listener per broker, however many ask at once', async () => {
    const { l, created, bound } = listeners(new Map([[1, 0]]));
    expect(l.isListening(1)).toBe(false);
    await Promise.all([l.ensure(1), l.ensure(1), l.ensure(1)]);
    expect(created).toEqual([1]);
    expect(bound).toEqual([1]);
    expect(l.isListening(1)).toBe(true);
    expect(l.problems()).toEqual([]);
    l.stop();
  });

  test('a port that cannot be bound: a ListenError naming it, listed until it binds', async () => {
    const port = await busyPort();
    const { l, bound } = listeners(new Map([[2, port]]));
    const failure = await l.ensure(2).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(ListenError);
    expect((failure as ListenError).message).toBe(
      `broker 2's port 127.0.0.1:${port} cannot be bound: address already in use (EADDRINUSE)`,
    );
    expect(l.problems()).toEqual([(failure as ListenError).message]);
    expect(l.isListening(2)).toBe(false);
    expect(bound).toEqual([]);
    l.stop();
  });
});
