// The `offsets` CLI on a group with live members: exit 3 naming the group and --force, --force
// to override; in-process, on an embedded store in a temporary directory.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { EmbeddedStore } from '../backends/embedded-store.js';
import { TOPIC_INCARNATIONS_GROUP } from '../backends/internal-groups.js';
import { encodeIncarnation } from './offsets/topic-incarnations.js';
import { getOffsets, setOffset } from './ops/admin/offsets-admin.js';
import { offsetsMain } from './offsets-cli.js';

let dir: string;
let stderr: string[];
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'kop-offsets-cli-'));
  stderr = [];
  vi.spyOn(console, 'error').mockImplementation((...args: unknown[]) => {
    stderr.push(args.join(' '));
  });
});
afterEach(() => {
  vi.restoreAllMocks();
  rmSync(dir, { recursive: true, force: true });
});

/** Group g: t-0 at 10, one live member (closed again: the CLI opens the store itself). */
async function runningGroup(): Promise<void> {
  const store = new EmbeddedStore({ dataDir: dir });
  await setOffset(store, { group: 'g', topic: 't', partition: 0, offset: 10n });
  await store.updateGroup('g', { kind: 'joined', generationId: 1, memberId: 'm', groupInstanceId: null });
  await store.close();
}

async function stored(): Promise<string[]> {
  const store = new EmbeddedStore({ dataDir: dir });
  try {
    return (await getOffsets(store, 'g')).map((l) => `${l.partition}:${l.offset}`);
  } finally {
    await store.close();
  }
}

const setArgs = (offset: string) => [
  'set',
  '--data-dir',
  dir,
  '--group',
  'g',
  '--topic',
  't',
  '--partition',
  '0',
  '--offset',
  offset,
];

describe('offsets CLI and live members', () => {
  it('set: exit 3 naming the group and --force; --force writes', async () => {
    await runningGroup();
    expect(await offsetsMain(setArgs('0'), {})).toBe(3);
    expect(stderr.join('\n')).toMatch(/group g has live members.*give --bootstrap-server.*use --force/);
    expect(await stored()).toEqual(['0:10']);
    expect(await offsetsMain([...setArgs('0'), '--force'], {})).toBe(0);
    expect(await stored()).toEqual(['0:0']);
    // Both counted in the store, where the proxies read them (kop_admin_cli_changes_total).
    const store = new EmbeddedStore({ dataDir: dir });
    try {
      expect(Object.fromEntries(await store.readCounts())).toEqual({
        'admin_changes:cli:set:refused': 1,
        'admin_changes:cli:set:ok': 1,
      });
    } finally {
      await store.close();
    }
  });

  it('asks the cluster given in the environment; an unreachable one leaves the refusal', async () => {
    await runningGroup();
    expect(await offsetsMain(setArgs('0'), { KOP_BOOTSTRAP_SERVER: '127.0.0.1:1' })).toBe(3);
    const message = stderr.join('\n');
    expect(message).toMatch(/group g has live members/);
    expect(message).not.toMatch(/give --bootstrap-server/);
    expect(await stored()).toEqual(['0:10']);
  });

  it('import and delete: exit 3 while the group runs, done with --force', async () => {
    await runningGroup();
    const file = path.join(dir, 'in.jsonl');
    writeFileSync(file, '{"group":"g","topic":"t","partition":1,"offset":"7"}\n');
    expect(await offsetsMain(['import', '--data-dir', dir, '--file', file], {})).toBe(3);
    expect(await offsetsMain(['delete', '--data-dir', dir, '--group', 'g'], {})).toBe(3);
    expect(await stored()).toEqual(['0:10']);
    expect(await offsetsMain(['import', '--data-dir', dir, '--file', file, '--force'], {})).toBe(0);
    expect(await stored()).toEqual(['0:10', '1:7']);
    expect(
      await offsetsMain(
        ['delete', '--data-dir', dir, '--group', 'g', '--topic', 't', '--partition', '1', '--force'],
        {},
      ),
    ).toBe(0);
    expect(await stored()).toEqual(['0:10']);
  });

  it('--force only where it means something, and without a value', async () => {
    expect(await offsetsMain(['get', '--data-dir', dir, '--group', 'g', '--force'], {})).toBe(2);
    expect(await offsetsMain(['import', '--to', 'cluster', '--force'], {})).toBe(2);
    expect(await offsetsMain([...setArgs('1'), '--force=yes'], {})).toBe(2);
    expect(stderr.join('\n')).toMatch(/--force applies to set, delete and import into the store/);
  });
});

/** What the CLI writes to stdout, from now until the mocks are restored. */
function captureStdout(): string[] {
  const out: string[] = [];
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    out.push(String(chunk));
    return true;
  });
  return out;
}

describe('offsets CLI: listing, dry runs, unknown groups, per-action help', () => {
  let stdout: string[];
  beforeEach(() => {
    stdout = captureStdout();
    vi.spyOn(console, 'log').mockImplementation((...args: unknown[]) => {
      stdout.push(args.join(' ') + '\n');
    });
  });

  async function seed(): Promise<void> {
    const store = new EmbeddedStore({ dataDir: dir });
    const at = (group: string, topic: string, partition: number, offset: bigint, ts: number) =>
      store.commit({
        group,
        requestId: `${group}-${topic}-${partition}`,
        writes: [
          {
            topic,
            partition,
            offset,
            leaderEpoch: -1,
            metadata: '',
            commitTimestamp: BigInt(ts),
            expireTimestamp: -1n,
          },
        ],
      });
    await at('orders', 't', 0, 10n, Date.UTC(2025, 0, 2, 3, 4, 5));
    await at('orders', 't', 1, 11n, Date.UTC(2025, 0, 2, 3, 4, 6));
    await at('billing', 'u', 0, 7n, Date.UTC(2024, 5, 1));
    await store.updateGroup('members-only', {
      kind: 'joined',
      generationId: 1,
      memberId: 'm',
      groupInstanceId: null,
    });
    await store.close();
  }

  it('groups: every group with its partition count and newest commit; --json as JSON lines', async () => {
    await seed();
    expect(await offsetsMain(['groups', '--data-dir', dir], {})).toBe(0);
    expect(stdout.join('').split('\n')).toEqual([
      'GROUP         PARTITIONS  LAST COMMIT (UTC)',
      'billing                1  2024-06-01T00:00:00.000Z',
      'members-only           0  -',
      'orders                 2  2025-01-02T03:04:06.000Z',
      '',
    ]);
    stdout.length = 0;
    expect(await offsetsMain(['groups', '--data-dir', dir, '--json'], {})).toBe(0);
    expect(
      stdout
        .join('')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l)),
    ).toEqual([
      { group: 'billing', partitions: 1, lastCommit: '2024-06-01T00:00:00.000Z' },
      { group: 'members-only', partitions: 0, lastCommit: '-' },
      { group: 'orders', partitions: 2, lastCommit: '2025-01-02T03:04:06.000Z' },
    ]);
  });

  it('get: exit 3 for a group the store does not have; a known group prints its offsets', async () => {
    await seed();
    expect(await offsetsMain(['get', '--data-dir', dir, '--group', 'nope'], {})).toBe(3);
    expect(stderr.join('\n')).toContain('the store has no group "nope"');
    expect(stdout.join('')).toBe('');
    expect(await offsetsMain(['get', '--data-dir', dir, '--group', 'orders', '--topic', 't'], {})).toBe(0);
    expect(stdout.join('').trim().split('\n')).toHaveLength(2);
    stdout.length = 0;
    // Known (a membership record), no offsets: nothing to print, not an error.
    expect(await offsetsMain(['get', '--data-dir', dir, '--group', 'members-only'], {})).toBe(0);
    expect(stdout.join('')).toBe('');
  });

  it('get, export, groups and set --expected: a re-created topic’s older offsets are none, as the proxies recorded', async () => {
    await seed();
    // A proxy recorded t re-created after orders' t-0 commit and before its t-1 commit. No
    // cluster is given: the record answers (with one, a re-creation not recorded yet counts too).
    const raw = new EmbeddedStore({ dataDir: dir });
    const since = BigInt(Date.UTC(2025, 0, 2, 3, 4, 5, 500));
    const record = { id: 'ID2', since, seen: Number(since) + 2_000, retired: ['ID1'], generation: 2n };
    const written = await raw.commit({
      group: TOPIC_INCARNATIONS_GROUP,
      requestId: 'record',
      writes: [encodeIncarnation('t', record, -1n)],
    });
    expect(written.status).toBe('ok');
    await raw.close();
    const lines = () =>
      stdout
        .join('')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { group: string; topic: string; partition: number; offset: string })
        .map((l) => `${l.group} ${l.topic}-${l.partition}=${l.offset}`);
    expect(await offsetsMain(['get', '--data-dir', dir, '--group', 'orders'], {})).toBe(0);
    expect(lines()).toEqual(['orders t-1=11']);
    stdout.length = 0;
    expect(await offsetsMain(['export', '--data-dir', dir], {})).toBe(0);
    expect(lines()).toEqual(['billing u-0=7', 'orders t-1=11']);
    stdout.length = 0;
    expect(await offsetsMain(['groups', '--data-dir', dir, '--json'], {})).toBe(0);
    expect(stdout.join('')).toContain('{"group":"orders","partitions":1,');
    const set = ['set', '--data-dir', dir, '--group', 'orders', '--topic', 't', '--partition', '0'];
    expect(await offsetsMain([...set, '--offset', '3', '--expected', '10', '--force'], {})).toBe(3);
    expect(stderr.join('\n')).toContain('expected offset 10, but it is -1');
    expect(await offsetsMain([...set, '--offset', '3', '--expected', '-1', '--force'], {})).toBe(0);
  });

  it('set --dry-run: prints the change and writes nothing; a real run would be refused: exit 3', async () => {
    await seed();
    const set = ['set', '--data-dir', dir, '--group', 'orders', '--topic', 't', '--partition', '0'];
    expect(await offsetsMain([...set, '--offset', '42', '--dry-run'], {})).toBe(0);
    expect(stdout.join('')).toBe(
      'would set orders t-0: 10 -> 42\ndry run: 1 offset would change; nothing was written\n',
    );
    stdout.length = 0;
    expect(await offsetsMain([...set, '--offset', '42', '--expected', '9', '--dry-run'], {})).toBe(3);
    expect(stdout.join('')).toContain('would be refused: orders t-0: expected offset 9, but it is 10');
    stdout.length = 0;
    const live = ['set', '--data-dir', dir, '--group', 'members-only', '--topic', 't', '--partition', '0'];
    expect(await offsetsMain([...live, '--offset', '1', '--dry-run'], {})).toBe(3);
    expect(stdout.join('')).toContain('would be refused: group members-only has live members');
    expect(await offsetsMain([...live, '--offset', '1', '--dry-run', '--force'], {})).toBe(0);
    const store = new EmbeddedStore({ dataDir: dir });
    try {
      expect((await getOffsets(store, 'orders')).map((l) => l.offset)).toEqual(['10', '11']);
      expect(await getOffsets(store, 'members-only')).toEqual([]);
    } finally {
      await store.close();
    }
  });

  it('import and delete --dry-run: the partitions that would change, nothing written', async () => {
    await seed();
    const file = path.join(dir, 'in.jsonl');
    writeFileSync(
      file,
      [
        '{"group":"orders","topic":"t","partition":0,"offset":"10"}',
        '{"group":"orders","topic":"t","partition":1,"offset":"20"}',
        '{"group":"new","topic":"t","partition":0,"offset":"5"}',
      ].join('\n'),
    );
    expect(await offsetsMain(['import', '--data-dir', dir, '--file', file, '--dry-run'], {})).toBe(0);
    expect(stdout.join('')).toBe(
      [
        'would set orders t-1: 11 -> 20',
        'would set new t-0: (none) -> 5',
        'dry run: 2 offsets would change, 1 already as given; nothing was written',
        '',
      ].join('\n'),
    );
    stdout.length = 0;
    expect(await offsetsMain(['delete', '--data-dir', dir, '--group', 'orders', '--dry-run'], {})).toBe(0);
    expect(stdout.join('')).toBe(
      [
        'would delete orders t-0: 10 -> (deleted)',
        'would delete orders t-1: 11 -> (deleted)',
        'would delete group orders (its offsets and membership record)',
        'dry run: 2 offsets would change; nothing was written',
        '',
      ].join('\n'),
    );
    const store = new EmbeddedStore({ dataDir: dir });
    try {
      expect((await getOffsets(store, 'orders')).map((l) => l.offset)).toEqual(['10', '11']);
      expect(await store.fetch('new', null)).toEqual([]);
    } finally {
      await store.close();
    }
  });

  it("<action> --help prints that action's usage; switches are refused where they mean nothing", async () => {
    for (const action of ['groups', 'export', 'import', 'get', 'set', 'delete']) {
      stdout.length = 0;
      expect(await offsetsMain([action, '--help'], {})).toBe(0);
      expect(stdout.join(''), action).toMatch(new RegExp(`^Usage: kafka-offset-proxy offsets ${action} `));
    }
    expect(await offsetsMain(['export', '--data-dir', dir, '--dry-run'], {})).toBe(2);
    expect(await offsetsMain(['get', '--data-dir', dir, '--group', 'g', '--json'], {})).toBe(2);
    expect(stderr.join('\n')).toMatch(/--json applies to groups only/);
  });

  it('a data directory on /proc is refused at once (exit 2), not spun on', async () => {
    expect(
      await offsetsMain(
        [...setArgs('1').slice(0, 1), ...setArgs('1').slice(3), '--data-dir', '/proc/kop-data'],
        {},
      ),
    ).toBe(2);
    expect(stderr.join('\n')).toMatch(
      /--data-dir="\/proc\/kop-data": \/proc is on proc, a kernel file system/,
    );
  });
});

describe('offsets CLI: reads never create a store; every command names its store', () => {
  beforeEach(() => {
    captureStdout();
  });

  it('groups, get, export and dry runs on a directory without a store: exit 3 naming it, nothing created', async () => {
    const missing = path.join(dir, 'not-here');
    const reads = [
      ['groups'],
      ['get', '--group', 'g'],
      ['export'],
      ['set', '--group', 'g', '--topic', 't', '--partition', '0', '--offset', '1', '--dry-run'],
      ['delete', '--group', 'g', '--dry-run'],
    ];
    for (const read of reads) {
      stderr.length = 0;
      expect(await offsetsMain([...read, '--data-dir', missing], {}), read[0]).toBe(3);
      expect(stderr.join('\n'), read[0]).toContain(`no embedded store in ${missing}`);
    }
    // The default directory is relative to the working directory: not created there either.
    const cwd = process.cwd();
    process.chdir(dir);
    try {
      expect(await offsetsMain(['get', '--group', 'g'], {})).toBe(3);
      expect(stderr.join('\n')).toContain(
        `no embedded store in ${path.join(dir, 'kafka-offset-proxy-data')}`,
      );
    } finally {
      process.chdir(cwd);
    }
    expect(existsSync(missing)).toBe(false);
    expect(existsSync(path.join(dir, 'kafka-offset-proxy-data'))).toBe(false);
  });

  it('each command says on stderr which store it opened; KOP_DATA_DIR is read as by the proxy', async () => {
    await runningGroup();
    expect(await offsetsMain(['groups'], { KOP_DATA_DIR: dir })).toBe(0);
    expect(stderr).toEqual([`store: embedded ${dir}`]);
    stderr.length = 0;
    expect(await offsetsMain(['get', '--group', 'g', '--store', `embedded:${dir}`], {})).toBe(0);
    expect(stderr).toEqual([`store: embedded ${dir}`]);
  });

  it('export --group of a group the store does not have: exit 3, nothing written', async () => {
    await runningGroup();
    const file = path.join(dir, 'out.jsonl');
    expect(
      await offsetsMain(['export', '--data-dir', dir, '--group', 'g', '--group', 'typo', '--file', file], {}),
    ).toBe(3);
    expect(stderr.join('\n')).toContain('the store has no group "typo"; nothing exported');
    expect(existsSync(file)).toBe(false);
    expect(await offsetsMain(['export', '--data-dir', dir, '--group', 'g', '--file', file], {})).toBe(0);
    expect(existsSync(file)).toBe(true);
  });

  it("the proxy's options and checks: a bad value, a proxy-only option, SASL without a mechanism", async () => {
    const cases: [string[], NodeJS.ProcessEnv, RegExp][] = [
      [['--store-timeout-ms', '0'], {}, /store-timeout-ms="0": out of range/],
      [[], { KOP_STORE_TIMEOUT_MS: 'soon' }, /store-timeout-ms="soon": not a whole number/],
      [['--listen', '127.0.0.1:1'], {}, /--listen is an option of the proxy that offsets does not use/],
      [[], { KOP_CLUSTER_SASL_USERNAME: 'u' }, /cluster-sasl-username="u": needs cluster-sasl-mechanism/],
      [['--broker-tls-ca', '/nonexistent.pem'], {}, /broker-tls-ca=.*needs broker-tls true/],
      [['--broker-tls', '--broker-tls-ca', path.join(dir, 'none.pem')], {}, /broker-tls-ca=.*cannot read/],
      [['--data-dir', dir, '--store', 'embedded:/elsewhere'], {}, /give the directory once/],
    ];
    for (const [args, env, message] of cases) {
      stderr.length = 0;
      expect(await offsetsMain(['groups', ...args], env), args.join(' ')).toBe(2);
      expect(stderr.join('\n')).toMatch(message);
    }
  });
});
