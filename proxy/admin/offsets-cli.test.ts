// The `offsets` CLI on a group with live members: exit 3 naming the group and --force, --force
// to override; in-process, on an embedded store in a temporary directory.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { EmbeddedStore } from '../../backends/embedded-store.js';
import { getOffsets, setOffset } from './offsets-admin.js';
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
