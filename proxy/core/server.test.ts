/**
 * The listener plan of the proxy (server.ts, broker-map.ts), decided without a broker: which port
 * fronts which node, what a port that cannot be bound does at start under each --bind-failure,
 * and the words the operator is told. The brokers are a fake discoverBrokers; the ports that must
 * fail to bind are held by the test itself. Against real brokers: proxy-core.test.ts and
 * reliability-limits.test.ts.
 */
import net from 'node:net';
import { afterEach, describe, expect, test } from 'vitest';
import { BrokerMap } from './broker-map.js';
import type { HostPort } from './broker-map.js';
import { bindProblem, ListenError } from './broker-listeners.js';
import { KafkaProxy } from './server.js';
import type { ProxyOptions } from './proxy-options.js';

const HOST = '127.0.0.1';
const UPSTREAM: HostPort = { host: '10.0.0.1', port: 9092 };

/** A port held open by the test until the end (so the proxy cannot bind it). */
const held: net.Server[] = [];
async function holdPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen({ host: HOST, port: 0 }, resolve));
  held.push(server);
  return (server.address() as net.AddressInfo).port;
}

/** A port that was free a moment ago (released at once, for the proxy to bind). */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen({ host: HOST, port: 0 }, resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const proxies: KafkaProxy[] = [];
function proxy(opts: Partial<ProxyOptions>): KafkaProxy {
  const p = new KafkaProxy({
    bootstrapServers: [UPSTREAM],
    listen: { host: HOST, port: 0 },
    discoverBrokers: async () => [],
    ...opts,
  });
  proxies.push(p);
  return p;
}

afterEach(async () => {
  await Promise.all(proxies.splice(0).map((p) => p.stop()));
  await Promise.all(held.splice(0).map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
});

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: HOST, port }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

describe('BrokerMap: which proxy port fronts which node', () => {
  test('node N on the listen port + 1 + N, unless mapped explicitly', () => {
    const map = new BrokerMap(19092, new Map([[7, 30000]]));
    expect([map.localPort(0), map.localPort(2), map.localPort(7)]).toEqual([19093, 19095, 30000]);
    map.setBasePort(40000);
    expect([map.localPort(0), map.localPort(7)]).toEqual([40001, 30000]);
  });

  test('a node id outside the port range needs an explicit mapping', () => {
    const map = new BrokerMap(65000, new Map([[1000, 20000]]));
    expect(() => map.localPort(535)).toThrow(
      /node id 535 maps outside the port range; give it an explicit --broker-port/,
    );
    expect(() => map.localPort(-1)).toThrow(/outside the port range/);
    expect(map.localPort(534)).toBe(65535);
    expect(map.localPort(1000)).toBe(20000);
  });

  test('learn: true when the address is new or changed', () => {
    const map = new BrokerMap(19092);
    expect(map.learn(1, UPSTREAM)).toBe(true);
    expect(map.learn(1, { ...UPSTREAM })).toBe(false);
    expect(map.learn(1, { host: '10.0.0.2', port: 9092 })).toBe(true);
    expect(map.upstreamOf(1)).toEqual({ host: '10.0.0.2', port: 9092 });
    expect(map.nodeIds()).toEqual([1]);
  });
});

describe('what the operator is told about a port that cannot be bound', () => {
  test('bindProblem: the reason in words, with the code', () => {
    const err = (code: string) => Object.assign(new Error('listen ' + code), { code });
    expect(bindProblem(err('EADDRINUSE'))).toBe('address already in use (EADDRINUSE)');
    expect(bindProblem(err('EACCES'))).toBe('permission denied (ports below 1024 need privileges) (EACCES)');
    expect(bindProblem(err('EADDRNOTAVAIL'))).toBe('the address is not one of this machine (EADDRNOTAVAIL)');
    expect(bindProblem(err('EWHATEVER'))).toBe('EWHATEVER');
    expect(bindProblem(new Error('plain'))).toBe('plain');
  });

  test('ListenError names the port and the option that chose it', () => {
    const at = { host: HOST, port: 19095 };
    expect(new ListenError('listen', at, null, 'r').message).toBe(
      'the bootstrap port 127.0.0.1:19095 cannot be bound: r',
    );
    expect(new ListenError('listen', at, 2, 'r').message).toBe(
      "broker 2's port 127.0.0.1:19095 (the --listen port + 1 + node id) cannot be bound: r",
    );
    expect(new ListenError('broker-port', at, 2, 'r').message).toBe(
      "broker 2's port 127.0.0.1:19095 cannot be bound: r",
    );
  });
});

describe('KafkaProxy.start: the listeners it opens', () => {
  test('the bootstrap port, then one listener per discovered broker, at its planned port', async () => {
    const [a, b] = [await freePort(), await freePort()];
    const p = proxy({
      brokerPorts: new Map([
        [1, a],
        [2, b],
      ]),
      discoverBrokers: async () => [
        { nodeId: 1, address: UPSTREAM },
        { nodeId: 2, address: { host: '10.0.0.2', port: 9092 } },
      ],
    });
    await p.start();
    expect(p.address.port).toBeGreaterThan(0);
    expect(await accepts(p.address.port)).toBe(true);
    expect(await accepts(a)).toBe(true);
    expect(await accepts(b)).toBe(true);
    expect(p.brokers.upstreamOf(2)).toEqual({ host: '10.0.0.2', port: 9092 });
    expect(p.listenerProblems()).toEqual([]);
  });

  test('with port 0 the broker ports count from the bootstrap port actually bound', async () => {
    const p = proxy({});
    await p.start();
    expect(p.brokers.localPort(3)).toBe(p.address.port + 4);
  });

  test('a cluster not reachable at start does not stop the proxy', async () => {
    const p = proxy({ discoverBrokers: () => Promise.reject(new Error('connection refused')) });
    await p.start();
    expect(await accepts(p.address.port)).toBe(true);
    expect(p.listenerProblems()).toEqual([]);
  });

  test('a bootstrap port in use: start rejects naming it and --listen', async () => {
    const port = await holdPort();
    const err = await proxy({ listen: { host: HOST, port } })
      .start()
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ListenError);
    expect(err).toMatchObject({ option: 'listen', nodeId: null, address: { host: HOST, port } });
    expect((err as Error).message).toBe(
      `the bootstrap port ${HOST}:${port} cannot be bound: address already in use (EADDRINUSE)`,
    );
  });

  test('--bind-failure exit: a broker port in use makes start reject (and close what it opened)', async () => {
    const port = await holdPort();
    const p = proxy({
      brokerPorts: new Map([[1, port]]),
      discoverBrokers: async () => [{ nodeId: 1, address: UPSTREAM }],
    });
    const err = await p.start().catch((e: unknown) => e);
    expect(err).toMatchObject({
      option: 'broker-port',
      nodeId: 1,
      reason: 'address already in use (EADDRINUSE)',
    });
    expect(await accepts(p.address.port)).toBe(false);
  });

  test('--bind-failure unready: it starts, and readiness lists the port', async () => {
    const port = await holdPort();
    const p = proxy({
      bindFailure: 'unready',
      brokerPorts: new Map([[1, port]]),
      discoverBrokers: async () => [{ nodeId: 1, address: UPSTREAM }],
    });
    await p.start();
    expect(await accepts(p.address.port)).toBe(true);
    expect(p.listenerProblems()).toEqual([
      `broker 1's port ${HOST}:${port} cannot be bound: address already in use (EADDRINUSE)`,
    ]);
  });

  test('refreshBrokers opens a listener for a broker that appeared later', async () => {
    const [first, port] = [await freePort(), await freePort()];
    const nodes = [{ nodeId: 1, address: UPSTREAM }];
    const p = proxy({
      brokerPorts: new Map([
        [1, first],
        [5, port],
      ]),
      discoverBrokers: async () => nodes,
    });
    await p.start();
    expect(await accepts(port)).toBe(false);
    nodes.push({ nodeId: 5, address: { host: '10.0.0.5', port: 9092 } });
    await p.refreshBrokers();
    expect(await accepts(port)).toBe(true);
  });
});
