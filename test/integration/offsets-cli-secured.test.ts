// The offsets CLI on a secured cluster (SASL_SSL): it takes the proxy's own cluster options, as
// flags or KOP_* variables, so `export --from cluster` and the live-member check reach a broker
// that needs TLS and a SASL login; without them the same commands fail (exit 4), as before.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { SASLOptions } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { EmbeddedStore } from '../../backends/embedded-store.js';
import { startKafka } from '../bed/kafka.js';
import type { KafkaCluster } from '../bed/kafka.js';
import { kafkaClient } from '../bed/roundtrip.js';
import { CLI_BIN } from '../harness/cli-process.js';
import { makeTestCerts } from '../harness/certs.js';
import type { TestCerts } from '../harness/certs.js';
import { ensureBuilt } from '../harness/proxy.js';

let cluster: KafkaCluster;
let certs: TestCerts;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'kop-cli-secured-'));
  certs = makeTestCerts();
  await ensureBuilt();
  cluster = await startKafka({
    sasl: true,
    tls: { cert: certs.files.serverCert, key: certs.files.serverKey },
  });
}, 240_000);
afterAll(async () => {
  await cluster?.stop();
  certs?.remove();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function cli(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('KOP_')));
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI_BIN, 'offsets', ...args],
      { timeout: 60_000, env: { ...base, ...env } },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** The admin's SASL_SSL connection to the broker, as the proxy makes it, in KOP_* variables. */
function clusterEnv(): NodeJS.ProcessEnv {
  const admin = cluster.sasl!.users[0]!;
  return {
    KOP_BOOTSTRAP_SERVER: cluster.bootstrap,
    KOP_BROKER_TLS: 'true',
    KOP_BROKER_TLS_CA: certs.files.ca,
    KOP_CLUSTER_SASL_MECHANISM: 'SCRAM-SHA-256',
    KOP_CLUSTER_SASL_USERNAME: admin.username,
    KOP_CLUSTER_SASL_PASSWORD: admin.password,
  };
}

/** A group with committed offsets at the broker (topic t, partitions 0 and 1 at 5 and 7). */
async function groupAtBroker(group: string, topic: string): Promise<void> {
  const admin = cluster.sasl!.users[0]!;
  const kafka = kafkaClient(cluster.bootstrap, {
    ssl: { ca: [certs.ca] },
    sasl: { mechanism: 'scram-sha-256', username: admin.username, password: admin.password } as SASLOptions,
  });
  const client = kafka.admin();
  await client.connect();
  try {
    await client.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true });
    await client.setOffsets({
      groupId: group,
      topic,
      partitions: [
        { partition: 0, offset: '5' },
        { partition: 1, offset: '7' },
      ],
    });
  } finally {
    await client.disconnect();
  }
}

describe('offsets CLI against a SASL_SSL cluster', () => {
  test('export --from cluster: with the KOP_* variables it reads the offsets; without SASL it cannot', async () => {
    await groupAtBroker('secured-g', 'secured-t');
    const env = clusterEnv();
    const out = await cli(['export', '--from', 'cluster', '--group', 'secured-g'], env);
    expect(out.stderr).toContain(`cluster: ${cluster.bootstrap}, TLS, SASL SCRAM-SHA-256`);
    expect(out.code).toBe(0);
    expect(
      out.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { partition: number; offset: string }),
    ).toMatchObject([
      { group: 'secured-g', topic: 'secured-t', partition: 0, offset: '5' },
      { group: 'secured-g', topic: 'secured-t', partition: 1, offset: '7' },
    ]);
    // The same as flags, and the password from the environment only (as the docs advise).
    const admin = cluster.sasl!.users[0]!;
    const flags = await cli(
      [
        'export',
        '--from',
        'cluster',
        '--group',
        'secured-g',
        '--bootstrap-server',
        cluster.bootstrap,
        '--broker-tls',
        '--broker-tls-ca',
        certs.files.ca,
        '--cluster-sasl-mechanism',
        'PLAIN',
        '--cluster-sasl-username',
        admin.username,
      ],
      { KOP_CLUSTER_SASL_PASSWORD: admin.password },
    );
    expect(flags.code).toBe(0);
    // The same offsets (commitTimestamp is the time of the export).
    const offsets = (text: string) => text.replace(/"commitTimestamp":"\d+"/g, '');
    expect(offsets(flags.stdout)).toBe(offsets(out.stdout));
    // A group the cluster has no offsets of is a typo: exit 3, nothing printed.
    const typo = await cli(['export', '--from', 'cluster', '--group', 'secured-typo'], env);
    expect(typo.code).toBe(3);
    expect(typo.stdout).toBe('');
    expect(typo.stderr).toContain('the cluster has no committed offset of group "secured-typo"');
    // Without the login the broker closes the connection: the test above can fail.
    const { KOP_CLUSTER_SASL_MECHANISM, KOP_CLUSTER_SASL_USERNAME, KOP_CLUSTER_SASL_PASSWORD, ...noSasl } =
      env;
    void [KOP_CLUSTER_SASL_MECHANISM, KOP_CLUSTER_SASL_USERNAME, KOP_CLUSTER_SASL_PASSWORD];
    expect((await cli(['export', '--from', 'cluster', '--group', 'secured-g'], noSasl)).code).toBe(4);
  });

  test('set: the live-member check asks the SASL_SSL broker, which says the group is empty', async () => {
    const dataDir = path.join(dir, 'live');
    const store = new EmbeddedStore({ dataDir });
    // A member the store saw join, which left without a LeaveGroup: the broker knows no such group.
    await store.updateGroup('stale-g', {
      kind: 'joined',
      generationId: 1,
      memberId: 'm',
      groupInstanceId: null,
    });
    await store.close();
    const set = [
      'set',
      '--data-dir',
      dataDir,
      '--group',
      'stale-g',
      '--topic',
      't',
      '--partition',
      '0',
      '--offset',
      '3',
    ];
    const unchecked = await cli(set);
    expect(unchecked.code).toBe(3);
    expect(unchecked.stderr).toMatch(/live members.*give --bootstrap-server/);
    const asked = await cli(set, clusterEnv());
    expect(asked.stderr).toContain(`store: embedded ${dataDir}`);
    expect(asked.code).toBe(0);
    const got = await cli(['get', '--data-dir', dataDir, '--group', 'stale-g']);
    expect(JSON.parse(got.stdout)).toMatchObject({ topic: 't', partition: 0, offset: '3' });
  });
});
