// The audit trail: what each kind of admin change writes (one line per partition, with the offset
// before and after), for changes that went through, were refused, were only planned, or never
// reached the store; and what it counts.
import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../../backends/memory-store.js';
import type { Logger } from '../../common/log.js';
import { AdminAudit, AUDIT_EVENT } from './audit.js';
import type { AdminChange, AuditResult } from './audit.js';
import { deleteOffsets, importToStore, setOffset } from './offsets-admin.js';
import { planSet } from './offsets-plan.js';

type Line = { level: string; event: string } & Record<string, unknown>;

function recorder() {
  const lines: Line[] = [];
  const counts: string[] = [];
  const log = (level: string) => (event: string, fields?: Record<string, unknown>) =>
    lines.push({ level, event, ...fields });
  const logger: Logger = {
    debug: log('debug'),
    info: log('info'),
    warn: log('warn'),
    error: log('error'),
    child: () => logger,
  };
  const audit = new AdminAudit(logger, (route, result: AuditResult) => counts.push(`${route}:${result}`));
  return { audit, lines, counts };
}

const http = { remote: '10.1.2.3:5555', who: 'http-token' };

async function storeWithGroups() {
  const store = new MemoryStore();
  await setOffset(store, { group: 'g', topic: 't', partition: 0, offset: 10n });
  await setOffset(store, { group: 'g', topic: 't', partition: 1, offset: 20n });
  await setOffset(store, { group: 'busy', topic: 't', partition: 0, offset: 5n });
  await store.updateGroup('busy', { kind: 'joined', generationId: 1, memberId: 'm', groupInstanceId: null });
  return store;
}

describe('AdminAudit', () => {
  it('a set: one line with who, where, the old and the new offset, and a count', async () => {
    const store = await storeWithGroups();
    const { audit, lines, counts } = recorder();
    const change: AdminChange = {
      route: 'set',
      actor: http,
      group: 'g',
      targets: [{ topic: 't', partition: 1, to: 42n }],
      force: false,
      dryRun: false,
    };
    await audit.audited(store, [change], () =>
      setOffset(store, { group: 'g', topic: 't', partition: 1, offset: 42n }),
    );
    expect(lines).toEqual([
      {
        level: 'info',
        event: AUDIT_EVENT,
        route: 'set',
        result: 'ok',
        who: 'http-token',
        remote: '10.1.2.3:5555',
        group: 'g',
        topic: 't',
        partition: 1,
        old: '20',
        new: '42',
        force: false,
        dryRun: false,
      },
    ]);
    expect(counts).toEqual(['set:ok']);
  });

  it('a refused set is audited as refused, with its reason, and changes nothing', async () => {
    const store = await storeWithGroups();
    const { audit, lines, counts } = recorder();
    const change: AdminChange = {
      route: 'set',
      actor: { remote: null, who: 'cli', user: 'ops' },
      group: 'busy',
      targets: [{ topic: 't', partition: 0, to: 0n }],
      force: false,
      dryRun: false,
    };
    await expect(
      audit.audited(store, [change], () =>
        setOffset(store, { group: 'busy', topic: 't', partition: 0, offset: 0n }),
      ),
    ).rejects.toThrow(/live members/);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 'warn',
      result: 'refused',
      who: 'cli',
      user: 'ops',
      remote: null,
      old: '5',
      new: '0',
      error: expect.stringMatching(/busy has live members/),
    });
    expect(counts).toEqual(['set:refused']);
  });

  it('a whole group deleted: one line per partition it had', async () => {
    const store = await storeWithGroups();
    const { audit, lines, counts } = recorder();
    const change: AdminChange = {
      route: 'delete_group',
      actor: http,
      group: 'g',
      force: true,
      dryRun: false,
    };
    await audit.audited(store, [change], () => deleteOffsets(store, 'g', undefined, { force: true }));
    expect(lines.map((l) => [l['topic'], l['partition'], l['old'], l['new'], l['force']])).toEqual([
      ['t', 0, '10', null, true],
      ['t', 1, '20', null, true],
    ]);
    expect(counts).toEqual(['delete_group:ok']);
    // A group without offsets still leaves its line.
    lines.length = 0;
    await audit.audited(store, [{ ...change, group: 'none' }], () => deleteOffsets(store, 'none'));
    expect(lines).toMatchObject([{ group: 'none', topic: null, partition: null, old: null, new: null }]);
  });

  it('an import: the refused group is refused, the others are written', async () => {
    const store = await storeWithGroups();
    const { audit, lines, counts } = recorder();
    const importLines = [
      {
        group: 'g',
        topic: 't',
        partition: 0,
        offset: '11',
        leaderEpoch: -1,
        metadata: '',
        commitTimestamp: '1',
      },
      {
        group: 'busy',
        topic: 't',
        partition: 0,
        offset: '6',
        leaderEpoch: -1,
        metadata: '',
        commitTimestamp: '1',
      },
    ];
    const changes: AdminChange[] = importLines.map((l) => ({
      route: 'import',
      actor: { remote: null, who: 'cli' },
      group: l.group,
      targets: [{ topic: l.topic, partition: l.partition, to: BigInt(l.offset) }],
      force: false,
      dryRun: false,
    }));
    await expect(audit.audited(store, changes, () => importToStore(store, importLines))).rejects.toThrow(
      /busy has live members/,
    );
    expect(lines.map((l) => [l['group'], l['result'], l['old'], l['new']])).toEqual([
      ['g', 'ok', '10', '11'],
      ['busy', 'refused', '5', '6'],
    ]);
    expect(counts).toEqual(['import:ok', 'import:refused']);
  });

  it('a dry run is audited as a dry run', async () => {
    const store = await storeWithGroups();
    const { audit, lines, counts } = recorder();
    const s = { group: 'g', topic: 't', partition: 0, offset: 3n };
    await audit.audited(
      store,
      [
        {
          route: 'set',
          actor: http,
          group: 'g',
          targets: [{ topic: 't', partition: 0, to: 3n }],
          force: false,
          dryRun: true,
        },
      ],
      () => planSet(store, s, {}),
    );
    expect(lines).toMatchObject([{ result: 'dry_run', dryRun: true, old: '10', new: '3' }]);
    expect(counts).toEqual(['set:dry_run']);
  });

  it('a request the route guard refused: a warning naming the caller and the target, and a count', () => {
    const { audit, lines, counts } = recorder();
    audit.denied('delete', { remote: '192.0.2.9:4000', who: 'anonymous' }, 403, {
      group: 'victim',
      topic: 't1',
      partition: '0',
    });
    audit.denied('delete_group', { remote: '192.0.2.9:4001', who: 'anonymous' }, 401, { group: 'victim' });
    expect(lines).toMatchObject([
      {
        level: 'warn',
        result: 'forbidden',
        remote: '192.0.2.9:4000',
        group: 'victim',
        topic: 't1',
        partition: 0,
      },
      { level: 'warn', result: 'unauthorized', group: 'victim', topic: null, partition: null },
    ]);
    expect(counts).toEqual(['delete:forbidden', 'delete_group:unauthorized']);
  });
});
