/**
 * `kafka-offset-proxy offsets <action>`: operator commands on the offset store.
 *
 *   groups  [--json]                                                the groups, partition count, last commit
 *   export  [--from store|cluster] [--group G ...] [--file F]      JSON lines to stdout or F
 *   import  [--to store|cluster] [--file F] [--force] [--dry-run]  JSON lines from stdin or F
 *   get     --group G [--topic T]
 *   set     --group G --topic T --partition P --offset O [--expected E] [--metadata M] [--force] [--dry-run]
 *   delete  --group G [--topic T --partition P] [--force] [--dry-run]
 *
 * The store is chosen as for the proxy (--store URL, --data-dir, or the KOP_* environment);
 * cluster transfers need --bootstrap-server. Writes to the store are refused while the group has
 * live members, as Kafka's tools are (checked with the broker when --bootstrap-server is given),
 * unless --force. Exit codes: 0 done, 2 bad input, 3 conflict or unknown group, 4 store or
 * cluster unavailable. Export and import show their progress on stderr when they take more than
 * a second. Every set, delete and import into the store (dry runs too) writes its audit lines
 * (ops/admin/audit.ts) to stderr as JSON.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { StoreCorruptError, StoreUnavailableError } from '../backends/errors.js';
import { describeStoreTarget, openStoreTarget, parseStoreUrl } from '../backends/open-store.js';
import type { OffsetStore } from '../backends/store.js';
import { BrokerMap, parseHostPortList } from './core/broker-map.js';
import { ClusterClient } from './client/cluster-client.js';
import { ConfigError, MAX_TIMER_MS } from './config.js';
import { createLogger, silentLogger } from './logger.js';
import { BrokerLookups } from './offsets/broker-lookups.js';
import { storeEndpoints } from './offsets/setup.js';
import { StoreHealth } from './offsets/store-health.js';
import { checkDataDir } from './startup-checks.js';
import { AdminAudit } from './ops/admin/audit.js';
import type { AdminActor, AdminChange } from './ops/admin/audit.js';
import type { AdminGuard } from './ops/admin/offsets-admin.js';
import {
  AdminError,
  byGroup,
  deleteOffsets,
  exportFromCluster,
  exportFromStore,
  formatLines,
  getOffsets,
  groupSummaries,
  GroupNotEmptyError,
  importToCluster,
  importToStore,
  parseLines,
  setOffset,
} from './ops/admin/offsets-admin.js';
import { formatPlan, planDelete, planImport, planSet } from './ops/admin/offsets-plan.js';
import type { Plan } from './ops/admin/offsets-plan.js';
import { Progress } from './ops/admin/progress.js';

const STORE_HELP = `Store: --store URL (default: the embedded store in --data-dir, default ./kafka-offset-proxy-data),
       --store-timeout-ms N (default 5000); environment KOP_STORE, KOP_DATA_DIR.`;
const LIVE_HELP = `Refused while the group has live members (consumers running), as Kafka's tools refuse it; with
--bootstrap-server (or KOP_BOOTSTRAP_SERVER) the broker is asked first whether they are still alive.
--force writes anyway: the running consumers keep their positions and commit over it.
--dry-run prints what would change (and what would be refused) and writes nothing.`;

/** Each action's usage, printed by `offsets <action> --help`. */
const ACTIONS = {
  groups: `Usage: kafka-offset-proxy offsets groups [--json] [store options]
Lists the groups in the store: name, number of partitions with an offset, time of the newest commit
(UTC). --json: one JSON object per line instead of columns.
${STORE_HELP}`,
  export: `Usage: kafka-offset-proxy offsets export [--from store|cluster] [--group G]... [--file F]
Writes JSON lines (one per partition, sorted by group, topic, partition) to stdout or F.
--from cluster reads the groups' offsets from the cluster's coordinators (all groups unless named),
which needs --bootstrap-server. Progress on stderr when it takes more than a second.
${STORE_HELP}`,
  import: `Usage: kafka-offset-proxy offsets import [--to store|cluster] [--file F] [--force] [--dry-run]
Reads JSON lines from F or stdin; each group is written all or nothing. --to cluster commits them at
the cluster's coordinators as an admin tool does (the group must be empty there).
${LIVE_HELP}
Progress on stderr when it takes more than a second.
${STORE_HELP}`,
  get: `Usage: kafka-offset-proxy offsets get --group G [--topic T]
Prints the group's stored offsets as JSON lines. Exit code 3 when the store has no such group.
${STORE_HELP}`,
  set: `Usage: kafka-offset-proxy offsets set --group G --topic T --partition P --offset O [--expected E]
                                     [--metadata M] [--force] [--dry-run]
Sets one offset; with --expected, only if the stored offset is E (-1 = none): compare-and-set.
${LIVE_HELP}
${STORE_HELP}`,
  delete: `Usage: kafka-offset-proxy offsets delete --group G [--topic T --partition P] [--force] [--dry-run]
Deletes one partition's offset, or the whole group (its offsets and membership record).
${LIVE_HELP}
${STORE_HELP}`,
} as const;
type Action = keyof typeof ACTIONS;

export const OFFSETS_USAGE = `Usage: kafka-offset-proxy offsets <groups|export|import|get|set|delete> [options]
  groups  [--json]                                           list the groups: partitions, last commit
  export  [--from store|cluster] [--group G]... [--file F]   write JSON lines (sorted) to stdout or F
  import  [--to store|cluster] [--file F] [--force] [--dry-run]
                                                             read JSON lines from stdin or F
  get     --group G [--topic T]                              print a group's stored offsets
  set     --group G --topic T --partition P --offset O [--expected E] [--metadata M] [--force] [--dry-run]
                                                             set one offset; with --expected, only if it is E (-1 = none)
  delete  --group G [--topic T --partition P] [--force] [--dry-run]
                                                             delete a group's offsets, or one partition's
  <action> --help                                            that action's options
Writes to the store are refused while the group has live members (consumers running), as Kafka's
tools refuse them; with --bootstrap-server the broker is asked first whether they are still alive.
--force writes anyway: the running consumers keep their positions and commit over it.
--dry-run prints what would change and writes nothing.
${STORE_HELP}
Cluster: --bootstrap-server host:port,... (environment KOP_BOOTSTRAP_SERVER)
Exit codes: 0 done, 2 bad input, 3 conflict (compare-and-set mismatch, group with live members) or
            unknown group (get), 4 store or cluster unavailable.`;

const FLAGS = new Set([
  'store',
  'data-dir',
  'store-timeout-ms',
  'bootstrap-server',
  'group',
  'topic',
  'partition',
  'offset',
  'expected',
  'metadata',
  'file',
  'from',
  'to',
]);
/** Flags without a value. */
const SWITCHES = new Set(['force', 'dry-run', 'json']);
/** Which switches each action takes (others are bad input, not silently ignored). */
const ACTION_SWITCHES: Record<Action, readonly string[]> = {
  groups: ['json'],
  export: [],
  import: ['force', 'dry-run'],
  get: [],
  set: ['force', 'dry-run'],
  delete: ['force', 'dry-run'],
};

function parseArgs(argv: string[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
    if (m && SWITCHES.has(m[1]!) && m[2] === undefined) {
      out.set(m[1]!, ['true']);
      continue;
    }
    if (!m || !FLAGS.has(m[1]!)) throw new AdminError(`unknown argument ${JSON.stringify(arg)}`, 'bad-input');
    const value = m[2] ?? argv[++i];
    if (value === undefined) throw new AdminError(`--${m[1]} needs a value`, 'bad-input');
    out.set(m[1]!, [...(out.get(m[1]!) ?? []), value]);
  }
  return out;
}

function integer(name: string, text: string | undefined, min: bigint, max = 9223372036854775807n): bigint {
  if (text === undefined) throw new AdminError(`--${name} is required`, 'bad-input');
  if (!/^-?\d+$/.test(text) || BigInt(text) < min || BigInt(text) > max) {
    throw new AdminError(
      `--${name}=${JSON.stringify(text)}: expected a whole number from ${min} to ${max}`,
      'bad-input',
    );
  }
  return BigInt(text);
}

const EXIT = { 'bad-input': 2, conflict: 3, unavailable: 4 } as const;

/** The audit of the CLI's changes: JSON lines on stderr, whatever the terminal (they are records). */
function cliAudit(): { audit: AdminAudit; actor: AdminActor } {
  const log = createLogger('info', { service: 'kafka-offset-proxy', component: 'audit' }, undefined, 'json');
  let user: string | undefined;
  try {
    user = userInfo().username;
  } catch {
    user = undefined; // no passwd entry for this uid (some containers)
  }
  return { audit: new AdminAudit(log), actor: { remote: null, who: 'cli', ...(user ? { user } : {}) } };
}

/** Prints a dry run's plan on stdout; the exit code a real run would have had. */
function printPlan(plan: Plan): number {
  process.stdout.write(formatPlan(plan).join('\n') + '\n');
  return plan.refusals.length > 0 ? EXIT.conflict : 0;
}

function formatGroups(
  groups: { group: string; partitions: number; lastCommit: number | null }[],
  json: boolean,
): string {
  const when = (ms: number | null) => (ms === null ? '-' : new Date(ms).toISOString());
  if (json)
    return groups
      .map(
        (g) =>
          JSON.stringify({ group: g.group, partitions: g.partitions, lastCommit: when(g.lastCommit) }) + '\n',
      )
      .join('');
  const width = Math.min(60, Math.max(5, ...groups.map((g) => g.group.length)));
  const row = (a: string, b: string, c: string) => `${a.padEnd(width)}  ${b.padStart(10)}  ${c}\n`;
  // A name is printed as JSON when it would break the columns (spaces, control characters).
  const name = (g: string) => (/^[\x21-\x7e\u00a0-\uffff]+$/.test(g) ? g : JSON.stringify(g));
  return (
    row('GROUP', 'PARTITIONS', 'LAST COMMIT (UTC)') +
    groups.map((g) => row(name(g.group), String(g.partitions), when(g.lastCommit))).join('')
  );
}

/**
 * Checks an offsets command line without running it: the action, the flags, and which switches
 * the action takes. Throws AdminError('bad-input') naming what is wrong.
 */
export function parseOffsetsCommand(argv: string[]): { action: Action; args: Map<string, string[]> } {
  const [action, ...rest] = argv;
  if (action === undefined || !Object.hasOwn(ACTIONS, action)) {
    throw new AdminError(
      `unknown action ${JSON.stringify(action ?? '')} (${Object.keys(ACTIONS).join(', ')}; see offsets --help)`,
      'bad-input',
    );
  }
  const args = parseArgs(rest);
  for (const sw of SWITCHES) {
    if (args.has(sw) && !ACTION_SWITCHES[action as Action].includes(sw)) {
      const where = sw === 'json' ? 'groups' : 'set, delete and import into the store';
      throw new AdminError(`--${sw} applies to ${where} only`, 'bad-input');
    }
  }
  return { action: action as Action, args };
}

export async function offsetsMain(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const [action, ...rest] = argv;
  if (action === undefined || action === '--help' || action === '-h') {
    console.log(OFFSETS_USAGE);
    return action === undefined ? 2 : 0;
  }
  if (Object.hasOwn(ACTIONS, action) && (rest.includes('--help') || rest.includes('-h'))) {
    console.log(ACTIONS[action as Action]);
    return 0;
  }
  let store: OffsetStore | null = null;
  let cluster: ClusterClient | null = null;
  let brokerAsked = false;
  try {
    const { args } = parseOffsetsCommand(argv);
    const one = (name: string): string | undefined => args.get(name)?.at(-1);
    const required = (name: string): string => {
      const v = one(name);
      if (v === undefined || v === '') throw new AdminError(`--${name} is required`, 'bad-input');
      return v;
    };
    const side = (name: 'from' | 'to'): 'store' | 'cluster' => {
      const v = one(name) ?? 'store';
      if (v !== 'store' && v !== 'cluster')
        throw new AdminError(`--${name}=${JSON.stringify(v)}: expected store or cluster`, 'bad-input');
      return v;
    };
    const bootstrap = one('bootstrap-server') ?? env['KOP_BOOTSTRAP_SERVER'];
    const clusterSide = (): { cluster: ClusterClient; lookups: BrokerLookups } => {
      if (!bootstrap)
        throw new AdminError('--bootstrap-server is required for cluster transfers', 'bad-input');
      let servers;
      try {
        servers = parseHostPortList(bootstrap);
      } catch (err) {
        throw new AdminError(
          `--bootstrap-server=${JSON.stringify(bootstrap)}: ${(err as Error).message}`,
          'bad-input',
        );
      }
      cluster = new ClusterClient({ bootstrapServers: servers, brokers: new BrokerMap(0) });
      return { cluster, lookups: new BrokerLookups(cluster) };
    };
    const timeoutText = one('store-timeout-ms');
    const openTheStore = async (): Promise<OffsetStore> => {
      const dataDirGiven = one('data-dir') ?? env['KOP_DATA_DIR'];
      const url = one('store') ?? env['KOP_STORE'];
      let target;
      try {
        target = parseStoreUrl(url, dataDirGiven ?? './kafka-offset-proxy-data');
      } catch (err) {
        throw new AdminError(`--store: ${(err as Error).message}`, 'bad-input');
      }
      const operationTimeoutMs =
        timeoutText === undefined
          ? 5000
          : Number(integer('store-timeout-ms', timeoutText, 1n, BigInt(MAX_TIMER_MS)));
      if (target.kind === 'embedded') {
        try {
          await checkDataDir(target.dir, url !== undefined && url.trim() !== '' ? 'store' : 'data-dir');
        } catch (err) {
          if (err instanceof ConfigError)
            throw new AdminError(err.message.replace(/^invalid configuration: /, '--'), 'bad-input');
          throw err;
        }
      }
      // Failures name the store's target ("connection refused to h:p"), not the client library's text.
      store = new StoreHealth(await openStoreTarget(target, { operationTimeoutMs }), {
        target: describeStoreTarget(target),
        endpoints: storeEndpoints(target),
        log: silentLogger,
        pingIntervalMs: MAX_TIMER_MS,
      });
      return store;
    };
    const force = args.has('force');
    const dryRun = args.has('dry-run');
    const { audit, actor } = cliAudit();
    const change = (c: Pick<AdminChange, 'route' | 'group' | 'targets'>): AdminChange => ({
      ...c,
      actor,
      force,
      dryRun,
    });
    for (const [on, name] of [
      [force, 'force'],
      [dryRun, 'dry-run'],
    ] as const) {
      if (on && action === 'import' && side('to') === 'cluster')
        throw new AdminError(`--${name} applies to set, delete and import into the store only`, 'bad-input');
    }
    /** Live members refuse a write unless --force; the broker, when given, is asked before a refusal. */
    const guard = (): AdminGuard => {
      if (force) return { force };
      if (!bootstrap) return {};
      const { lookups } = clusterSide();
      brokerAsked = true;
      return { groupIsEmptyAtBroker: (g) => lookups.groupIsEmpty(g) };
    };

    switch (action as Action) {
      case 'groups': {
        const progress = new Progress('groups read');
        const groups = await groupSummaries(await openTheStore(), (d, t) => progress.update(d, t));
        progress.end();
        process.stdout.write(formatGroups(groups, args.has('json')));
        return 0;
      }
      case 'export': {
        const groups = args.get('group');
        const progress = new Progress('groups exported');
        const onProgress = (d: number, t: number) => progress.update(d, t);
        const lines =
          side('from') === 'cluster'
            ? await (() => {
                const c = clusterSide();
                return exportFromCluster(c.cluster, c.lookups, groups, onProgress);
              })()
            : await exportFromStore(await openTheStore(), groups, onProgress);
        progress.end();
        const file = one('file');
        if (file) writeFileSync(file, formatLines(lines));
        else process.stdout.write(formatLines(lines));
        console.error(`exported ${lines.length} offsets`);
        return 0;
      }
      case 'import': {
        const file = one('file');
        const lines = parseLines(file ? readFileSync(file, 'utf8') : readFileSync(0, 'utf8'));
        const changes = [...byGroup(lines)].map(([group, ls]) =>
          change({
            route: 'import',
            group,
            targets: ls.map((l) => ({ topic: l.topic, partition: l.partition, to: BigInt(l.offset) })),
          }),
        );
        if (dryRun) {
          const s = await openTheStore();
          return printPlan(await audit.audited(s, changes, () => planImport(s, lines, guard())));
        }
        const progress = new Progress('offsets imported');
        const onProgress = (d: number, t: number) => progress.update(d, t);
        let n: number;
        try {
          n =
            side('to') === 'cluster'
              ? await importToCluster(clusterSide().lookups, lines, onProgress)
              : await (async () => {
                  const s = await openTheStore();
                  return audit.audited(s, changes, () => importToStore(s, lines, guard(), onProgress));
                })();
        } finally {
          progress.end();
        }
        console.error(`imported ${n} offsets`);
        return 0;
      }
      case 'get': {
        const group = required('group');
        const s = await openTheStore();
        const all = await getOffsets(s, group);
        const topic = one('topic');
        const lines = topic === undefined ? all : all.filter((l) => l.topic === topic);
        if (all.length === 0 && (await s.getGroup(group)) === null) {
          console.error(`kafka-offset-proxy offsets get: the store has no group ${JSON.stringify(group)}`);
          return EXIT.conflict;
        }
        process.stdout.write(formatLines(lines));
        return 0;
      }
      case 'set': {
        const group = required('group');
        const topic = required('topic');
        const partition = Number(integer('partition', one('partition'), 0n, 2147483647n));
        const offset = integer('offset', one('offset'), 0n);
        const expectedText = one('expected');
        const metadata = one('metadata');
        const request = {
          group,
          topic,
          partition,
          offset,
          ...(expectedText !== undefined ? { expected: integer('expected', expectedText, -1n) } : {}),
          ...(metadata !== undefined ? { metadata } : {}),
        };
        const s = await openTheStore();
        const changes = [change({ route: 'set', group, targets: [{ topic, partition, to: offset }] })];
        if (dryRun) return printPlan(await audit.audited(s, changes, () => planSet(s, request, guard())));
        await audit.audited(s, changes, () => setOffset(s, request, guard()));
        console.error(`set ${group} ${topic}-${partition} to ${offset}`);
        return 0;
      }
      case 'delete': {
        const group = required('group');
        const topic = one('topic');
        const partitionText = one('partition');
        if ((topic === undefined) !== (partitionText === undefined)) {
          throw new AdminError(
            'give both --topic and --partition, or neither (the whole group)',
            'bad-input',
          );
        }
        const partitions =
          topic === undefined
            ? undefined
            : [{ topic, partition: Number(integer('partition', partitionText, 0n, 2147483647n)) }];
        const s = await openTheStore();
        const changes = [
          change({
            route: partitions ? 'delete' : 'delete_group',
            group,
            ...(partitions ? { targets: partitions.map((p) => ({ ...p, to: null })) } : {}),
          }),
        ];
        if (dryRun)
          return printPlan(await audit.audited(s, changes, () => planDelete(s, group, partitions, guard())));
        await audit.audited(s, changes, () => deleteOffsets(s, group, partitions, guard()));
        console.error(partitions ? `deleted ${group} ${topic}-${partitionText}` : `deleted group ${group}`);
        return 0;
      }
    }
    return EXIT['bad-input'];
  } catch (err) {
    if (err instanceof GroupNotEmptyError) {
      const unchecked = brokerAsked
        ? ''
        : ' (the broker was not asked whether they are still alive: give --bootstrap-server for that)';
      console.error(
        `kafka-offset-proxy offsets ${action}: ${err.message}${unchecked}. Stop the consumers first, or use --force`,
      );
      return EXIT.conflict;
    }
    if (err instanceof AdminError) {
      console.error(`kafka-offset-proxy offsets ${action}: ${err.message}`);
      return EXIT[err.kind];
    }
    if (err instanceof StoreUnavailableError || err instanceof StoreCorruptError) {
      console.error(`kafka-offset-proxy offsets ${action}: ${err.message}`);
      return EXIT.unavailable;
    }
    console.error(
      `kafka-offset-proxy offsets ${action}: ${err instanceof Error ? err.message : String(err)}`,
    );
    return EXIT.unavailable;
  } finally {
    (cluster as ClusterClient | null)?.close();
    await (store as OffsetStore | null)?.close().catch(() => undefined);
  }
}
