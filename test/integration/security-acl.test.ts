// No widening of access: on a SASL cluster with ACLs, a client commits, fetches and deletes offsets
// through the proxy only where the cluster's ACLs let its principal do so at the broker (READ on
// the group and topic for OffsetCommit, DESCRIBE for OffsetFetch, DELETE on the group for
// OffsetDelete), and is refused with GROUP/TOPIC_AUTHORIZATION_FAILED otherwise.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  AclOperationTypes,
  AclPermissionTypes,
  AclResourceTypes,
  Kafka,
  logLevel,
  ResourcePatternTypes,
} from 'kafkajs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { EmbeddedStore } from '../../backends/embedded-store.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { defaultOffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';
import type { OffsetCommitResponse } from '../../protocol/messages/offset-commit-response.js';
import { defaultOffsetDeleteRequest } from '../../protocol/messages/offset-delete-request.js';
import type { OffsetDeleteResponse } from '../../protocol/messages/offset-delete-response.js';
import { defaultOffsetFetchRequest } from '../../protocol/messages/offset-fetch-request.js';
import type { OffsetFetchResponse } from '../../protocol/messages/offset-fetch-response.js';
import type { SaslAuthenticateResponse } from '../../protocol/messages/sasl-authenticate-response.js';
import type { SaslHandshakeResponse } from '../../protocol/messages/sasl-handshake-response.js';
import { startKafka } from '../bed/kafka.js';
import type { KafkaCluster } from '../bed/kafka.js';
import { uniqueName } from '../bed/clients/scenarios.js';
import { startOffsetProxy } from '../harness/offset-proxy.js';
import type { OffsetProxy } from '../harness/offset-proxy.js';
import { RawClient } from '../harness/raw-client.js';

const GROUP_AUTHORIZATION_FAILED = 30;
const TOPIC_AUTHORIZATION_FAILED = 29;
let correlation = 1;

/** A raw connection to the proxy, authenticated with SASL/PLAIN (SaslHandshake v1 + SaslAuthenticate). */
async function login(bootstrap: string, username: string, password: string): Promise<RawClient> {
  const client = await RawClient.connect(bootstrap);
  const hs = await client.request<SaslHandshakeResponse>(ApiKey.SaslHandshake, 1, correlation++, {
    mechanism: 'PLAIN',
  });
  expect(hs.errorCode).toBe(0);
  const auth = await client.request<SaslAuthenticateResponse>(ApiKey.SaslAuthenticate, 1, correlation++, {
    authBytes: Buffer.from(`\u0000${username}\u0000${password}`),
  });
  expect(auth.errorCode, auth.errorMessage ?? '').toBe(0);
  return client;
}

async function commit(client: RawClient, group: string, topic: string, offset: bigint): Promise<number> {
  const r = await client.request<OffsetCommitResponse>(ApiKey.OffsetCommit, 8, correlation++, {
    ...defaultOffsetCommitRequest(),
    groupId: group,
    generationIdOrMemberEpoch: -1,
    memberId: '',
    topics: [
      {
        name: topic,
        partitions: [
          {
            partitionIndex: 0,
            committedOffset: offset,
            committedLeaderEpoch: -1,
            commitTimestamp: -1n,
            committedMetadata: '',
          },
        ],
      },
    ],
  });
  return r.topics[0]!.partitions[0]!.errorCode;
}

async function fetchOffsets(client: RawClient, group: string, topic: string) {
  const r = await client.request<OffsetFetchResponse>(ApiKey.OffsetFetch, 8, correlation++, {
    ...defaultOffsetFetchRequest(),
    groups: [
      { groupId: group, memberId: null, memberEpoch: -1, topics: [{ name: topic, partitionIndexes: [0] }] },
    ],
  });
  return r.groups[0]!;
}

describe('the proxy widens no access (SASL broker with ACLs)', () => {
  let cluster: KafkaCluster;
  let dir: string;
  let store: EmbeddedStore;
  let proxy: OffsetProxy;
  let admin: ReturnType<Kafka['admin']>;
  const group = uniqueName('acl-group');
  const topic = uniqueName('acl-topic');
  let adminUser: { username: string; password: string };
  let user: { username: string; password: string };

  beforeAll(async () => {
    cluster = await startKafka({ sasl: true });
    [adminUser, user] = cluster.sasl!.users as [typeof adminUser, typeof user];
    dir = mkdtempSync(path.join(os.tmpdir(), 'kop-acl-'));
    store = new EmbeddedStore({ dataDir: dir });
    // The proxy's own connections (mirrored commits here) authenticate with SCRAM as the admin.
    proxy = await startOffsetProxy(cluster.bootstrap, store, [
      '--mirror-commits',
      '--cluster-sasl-mechanism',
      'SCRAM-SHA-256',
      '--cluster-sasl-username',
      adminUser.username,
      '--cluster-sasl-password',
      adminUser.password,
    ]);
    admin = new Kafka({
      brokers: [cluster.bootstrap],
      logLevel: logLevel.NOTHING,
      sasl: { mechanism: 'plain', username: adminUser.username, password: adminUser.password },
    }).admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
  });
  afterAll(async () => {
    await admin?.disconnect();
    await proxy?.stop();
    await store?.close();
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function allow(
    resourceType: AclResourceTypes,
    resourceName: string,
    operation: AclOperationTypes,
  ): Promise<void> {
    await admin.createAcls({
      acl: [
        {
          resourceType,
          resourceName,
          resourcePatternType: ResourcePatternTypes.LITERAL,
          principal: `User:${user.username}`,
          host: '*',
          operation,
          permissionType: AclPermissionTypes.ALLOW,
        },
      ],
    });
  }

  /** ACLs reach the broker's authorizer asynchronously: retry on fresh connections (the proxy caches per connection). */
  async function eventually<T>(
    attempt: (client: RawClient) => Promise<T>,
    done: (v: T) => boolean,
  ): Promise<T> {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const client = await login(proxy.bootstrap, user.username, user.password);
      try {
        const v = await attempt(client);
        if (done(v) || Date.now() > deadline) return v;
      } finally {
        client.close();
      }
      await new Promise((r) => setTimeout(r, 300));
    }
  }

  test('no ACLs: commit and fetch are refused for the group, and nothing is stored', async () => {
    const client = await login(proxy.bootstrap, user.username, user.password);
    try {
      expect(await commit(client, group, topic, 5n)).toBe(GROUP_AUTHORIZATION_FAILED);
      expect((await fetchOffsets(client, group, topic)).errorCode).toBe(GROUP_AUTHORIZATION_FAILED);
    } finally {
      client.close();
    }
    expect(await store.fetch(group, null)).toEqual([]);
  });

  test('READ on the group only: the topic is refused', async () => {
    await allow(AclResourceTypes.GROUP, group, AclOperationTypes.READ);
    const code = await eventually(
      (c) => commit(c, group, topic, 6n),
      (c) => c !== GROUP_AUTHORIZATION_FAILED,
    );
    expect(code).toBe(TOPIC_AUTHORIZATION_FAILED);
    expect(await store.fetch(group, null)).toEqual([]);
    const fetched = await eventually(
      (c) => fetchOffsets(c, group, topic),
      (g) => g.errorCode === 0,
    );
    expect(fetched.topics[0]!.partitions[0]).toMatchObject({
      committedOffset: -1n,
      errorCode: TOPIC_AUTHORIZATION_FAILED,
    });
  });

  test('READ on the group and the topic: the commit is stored and fetched back; other groups stay closed', async () => {
    await allow(AclResourceTypes.TOPIC, topic, AclOperationTypes.READ);
    const code = await eventually(
      (c) => commit(c, group, topic, 7n),
      (c) => c === 0,
    );
    expect(code).toBe(0);
    expect((await store.fetch(group, null))[0]!.offset).toBe(7n);
    const fetched = await eventually(
      (c) => fetchOffsets(c, group, topic),
      (g) => g.errorCode === 0,
    );
    expect(fetched.topics[0]!.partitions[0]).toMatchObject({ committedOffset: 7n, errorCode: 0 });

    const client = await login(proxy.bootstrap, user.username, user.password);
    try {
      const other = uniqueName('acl-other');
      expect(await commit(client, other, topic, 1n)).toBe(GROUP_AUTHORIZATION_FAILED);
    } finally {
      client.close();
    }
  });

  test('OffsetDelete needs DELETE on the group', async () => {
    const del = (c: RawClient) =>
      c.request<OffsetDeleteResponse>(ApiKey.OffsetDelete, 0, correlation++, {
        ...defaultOffsetDeleteRequest(),
        groupId: group,
        topics: [{ name: topic, partitions: [{ partitionIndex: 0 }] }],
      });
    const client = await login(proxy.bootstrap, user.username, user.password);
    try {
      expect((await del(client)).errorCode).toBe(GROUP_AUTHORIZATION_FAILED);
    } finally {
      client.close();
    }
    expect(await store.fetch(group, null)).toHaveLength(1);
    await allow(AclResourceTypes.GROUP, group, AclOperationTypes.DELETE);
    const r = await eventually(del, (x) => x.errorCode === 0);
    expect(r.errorCode).toBe(0);
    expect(await store.fetch(group, null)).toEqual([]);
  });

  test("the super user is not restricted; the proxy's own SCRAM connection mirrors the commit to the broker", async () => {
    const adminGroup = uniqueName('admin-group');
    const client = await login(proxy.bootstrap, adminUser.username, adminUser.password);
    try {
      expect(await commit(client, adminGroup, topic, 3n)).toBe(0);
    } finally {
      client.close();
    }
    const deadline = Date.now() + 15_000;
    let atBroker: { partition: number; offset: string }[] = [];
    while (Date.now() < deadline) {
      atBroker = (await admin.fetchOffsets({ groupId: adminGroup, topics: [topic] }))[0]!.partitions;
      if (atBroker.some((p) => p.offset === '3')) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(atBroker.find((p) => p.partition === 0)?.offset).toBe('3');
  });
});
