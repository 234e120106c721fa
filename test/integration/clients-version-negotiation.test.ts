// Issue 39: real clients negotiate the same versions through the proxy as directly. Each client
// (the Java 4.4 client on the classic and on the KIP-848 protocol, librdkafka through
// confluent-kafka, kafkajs) runs one session of produce, consume in a group and commit, once
// straight to the Kafka 4.4.0 broker and once through the proxy, and a tap in front of each notes
// every (API key, version) the client sent. The two sets must be the same; a difference that is
// real and intended is named in ALLOWED with its reason.
//
// The taps see everything because every address a client is told stays on them: directly, the
// shared broker's TAPPED listener is advertised at the tap's port (test/bed/global-setup.ts);
// through the proxy, the proxy advertises 127.0.0.2 and the tap listens there (127.0.0.0/8 is all
// loopback) and relays to the proxy's ports on 127.0.0.1.
import { beforeAll, describe, expect, inject, test } from 'vitest';
import { apiCodecs } from '../../protocol/messages/index.js';
import { javaClient } from '../bed/clients/java.js';
import { createTopics, kafkajsClient } from '../bed/clients/kafkajs.js';
import { pythonClient } from '../bed/clients/python.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import type { BedClient, ClientTarget } from '../bed/clients/types.js';
import { ensureBuilt, spawnProxy } from '../harness/proxy.js';
import type { ProxyProcess } from '../harness/proxy.js';
import { RequestTap } from '../harness/request-tap.js';
import { tappedBroker, type TappedBroker } from '../harness/tapped-broker.js';

const classpath = inject('kafkaClasspath');
const RECORDS = 20;
/** The proxy's broker ports are its bootstrap port + 1 + node id; the tap covers a few. */
const PROXY_PORTS_TAPPED = 8;

/**
 * Differences that are real and intended: `client` sends `pair` ("apiKey:version") only `on` one
 * path, for `reason`. Empty: every client sends the same pairs through the proxy as directly.
 */
const ALLOWED: { client: string; pair: string; on: 'direct' | 'proxy'; reason: string }[] = [];

/**
 * APIs a client sends or not depending on timing alone, not on negotiation: one of them seen on one
 * path only is no difference, but seen on both it must be at the same versions.
 */
const TIMING_DEPENDENT = new Map<number, string>([
  [12, 'Heartbeat: a classic member heartbeats only once its session outlasts heartbeat.interval.ms'],
]);

const name = (pair: string): string => {
  const [apiKey, version] = pair.split(':').map(Number);
  return `${apiCodecs.get(apiKey!)?.name ?? `unknown_${apiKey}`} v${version}`;
};

let brokerBootstrap: string;
/** Where the direct tap listens: the port the TAPPED listener is advertised at. */
let directPort: number;
let directTap: RequestTap;
let direct: TappedBroker;
let proxiedTap: RequestTap;
let proxy: ProxyProcess;

beforeAll(async () => {
  await ensureBuilt();
  direct = await tappedBroker(inject('kafkaBootstrap'), inject('kafkaTappedListener'));
  brokerBootstrap = direct.bootstrap;
  directPort = direct.tappedPort;
  directTap = direct.tap;
  proxy = await spawnProxy(['--bootstrap-server', brokerBootstrap, '--advertised-host', '127.0.0.2']);
  proxiedTap = new RequestTap();
  for (let port = proxy.port; port <= proxy.port + PROXY_PORTS_TAPPED; port++) {
    await proxiedTap.listen({ host: '127.0.0.2', port }, { host: '127.0.0.1', port });
  }
  return async () => {
    await proxiedTap.close();
    await proxy.stop('SIGKILL');
    await direct.stop();
  };
}, 180_000);

/** One session: produce, then consume in a new group, committing what was consumed. */
async function session(client: BedClient, target: ClientTarget, tag: string): Promise<void> {
  const topic = uniqueName(`versions-${client.name}-${tag}`);
  await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 2 }]);
  await client.produce(target, { topic, count: RECORDS });
  const consumed = await client.consume(target, { topic, group: `${topic}-g`, max: RECORDS });
  expect(consumed.records.length).toBe(RECORDS);
  expect(consumed.committed.reduce((n, c) => n + c.offset, 0)).toBe(RECORDS);
}

async function compare(client: BedClient): Promise<void> {
  const label = client.name;
  directTap.label = label;
  proxiedTap.label = label;
  await Promise.all([
    session(client, { bootstrap: `127.0.0.1:${directPort}` }, 'direct'),
    session(client, { bootstrap: `127.0.0.2:${proxy.port}` }, 'proxy'),
  ]);
  const direct = directTap.pairs(label);
  const proxied = proxiedTap.pairs(label);
  const apiKey = (pair: string) => Number(pair.split(':')[0]);
  const allowed = (pair: string, on: 'direct' | 'proxy') =>
    ALLOWED.some((a) => a.client === label && a.pair === pair && a.on === on) ||
    (TIMING_DEPENDENT.has(apiKey(pair)) &&
      !(on === 'direct' ? proxied : direct).some((p) => apiKey(p) === apiKey(pair)));
  const onlyDirect = direct.filter((p) => !proxied.includes(p) && !allowed(p, 'direct'));
  const onlyProxy = proxied.filter((p) => !direct.includes(p) && !allowed(p, 'proxy'));
  // Every difference is printed, the allowed ones too.
  const shownDirect = direct.filter((p) => !proxied.includes(p));
  const shownProxy = proxied.filter((p) => !direct.includes(p));
  console.log(
    `[versions] ${label}: ${direct.length} (API, version) pairs directly, ${proxied.length} through the proxy: ` +
      `${direct.map(name).join(', ')}` +
      (shownDirect.length + shownProxy.length > 0
        ? `; only directly: ${shownDirect.map(name).join(', ') || '-'}; only through the proxy: ${shownProxy.map(name).join(', ') || '-'}`
        : ''),
  );
  // The tap saw the session at all (a session that bypassed it would compare two empty sets).
  expect(direct.length).toBeGreaterThan(5);
  expect({ onlyDirect: onlyDirect.map(name), onlyProxy: onlyProxy.map(name) }).toEqual({
    onlyDirect: [],
    onlyProxy: [],
  });
}

describe('clients send the same (API, version) pairs through the proxy as directly to Kafka 4.4.0', () => {
  test('Java 4.4 client, classic group protocol', { timeout: 180_000 }, async () => {
    await compare(await javaClient(classpath, { protocol: 'classic' }));
  });

  test('Java 4.4 client, KIP-848 group protocol', { timeout: 180_000 }, async () => {
    await compare(await javaClient(classpath, { protocol: 'consumer' }));
  });

  test('librdkafka (confluent-kafka)', { timeout: 180_000 }, async () => {
    await compare(pythonClient);
  });

  test('kafkajs', { timeout: 180_000 }, async () => {
    await compare(kafkajsClient);
  });
});
