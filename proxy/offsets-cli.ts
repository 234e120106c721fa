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
 * The store and the cluster are given by the proxy's own options (offsets-command.ts: flags, KOP_*
 * variables, a --config file, the same defaults and checks, through loadConfig), so the CLI
 * reaches a TLS or SASL cluster as the proxy does. Reads (groups, get, export, dry runs) never
 * create a store; writes hold an embedded directory against a running proxy (data-dir-holder.ts).
 * Writes to the store are refused while the group has live members, as Kafka's tools are
 * (checked with the broker when --bootstrap-server is given), unless --force. Exit codes: 0 done,
 * 2 bad input, 3 conflict, unknown group or no store, 4 store or cluster unavailable. Export and
 * import show their progress on stderr when they take more than a second. Every set, delete and
 * import into the store (dry runs too) writes its audit lines (ops/admin/audit.ts) to stderr as JSON.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import path from 'node:path';
import { DataDirHeldError } from '../backends/data-dir-holder.js';
import { StoreCorruptError, StoreUnavailableError } from '../backends/errors.js';
import { InternalGroupsHidden } from '../backends/internal-groups.js';
import { describeStoreTarget, openStoreTarget } from '../backends/open-store.js';
import type { OffsetStore } from '../backends/store.js';
import { readBrokerTls } from './broker-tls.js';
import type { ClusterClient } from './client/cluster-client.js';
import { ConfigError, loadConfig, MAX_TIMER_MS } from './config.js';
import type { ProxyConfig } from './config.js';
import { createLogger, silentLogger } from './logger.js';
import { BrokerLookups } from './offsets/broker-lookups.js';
import { cliCurrentStore, createClusterClient, storeEndpoints } from './offsets/setup.js';
import { StoreHealth } from './offsets/store-health.js';
import { checkDataDir, checkTlsFiles } from './startup-checks.js';
import { AdminAudit, storeCountName } from './ops/admin/audit.js';
import type { AdminActor, AdminChange, CountChange } from './ops/admin/audit.js';
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
import { ACTIONS, integer, OFFSETS_USAGE, parseOffsetsCommand } from './offsets-command.js';
import type { Action } from './offsets-command.js';

const EXIT = { 'bad-input': 2, conflict: 3, unavailable: 4 } as const;

/** The audit of the CLI's changes: JSON lines on stderr, whatever the terminal (they are records). */
function cliAudit(count: CountChange): { audit: AdminAudit; actor: AdminActor } {
  const log = createLogger('info', { service: 'kafka-offset-proxy', component: 'audit' }, undefined, 'json');
  let user: string | undefined;
  try {
    user = userInfo().username;
  } catch {
    user = undefined; // no passwd entry for this uid (some containers)
  }
  return {
    audit: new AdminAudit(log, count),
    actor: { remote: null, who: 'cli', ...(user ? { user } : {}) },
  };
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

/** The store or the cluster holds nothing of what was asked: exit code 3. */
class NotFound extends Error {}

/**
 * The proxy's configuration from the CLI's share of it: the same table, defaults, environment
 * and checks (a TLS file that cannot be read is refused before anything connects).
 */
function loadSharedConfig(proxyArgv: string[], env: NodeJS.ProcessEnv): ProxyConfig {
  try {
    const config = loadConfig(proxyArgv, env, { bootstrapOptional: true });
    checkTlsFiles(config);
    return config;
  } catch (err) {
    if (err instanceof ConfigError) throw new AdminError(err.message, 'bad-input');
    throw err;
  }
}

/** Where an embedded store keeps its data; a read never opens a directory without it. */
const EMBEDDED_DATA_FILE = 'data.mdb';

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
  /**
   * Each audited change is also counted in the store, where the proxies read it
   * (kop_admin_cli_changes_total): this process ends before anything could scrape it. Not dry
   * runs: they change nothing, and one must not write to an embedded directory a proxy holds.
   */
  let counts: OffsetStore | null = null;
  const counting: Promise<void>[] = [];
  const countInStore: CountChange = (route, result) => {
    if (counts?.addToCount === undefined || result === 'dry_run') return;
    counting.push(
      counts.addToCount(storeCountName(route, result)).catch((err: unknown) => {
        console.error(
          `kafka-offset-proxy offsets: a ${route} change (${result}) is audited but not counted in the store: ${(err as Error).message}`,
        );
      }),
    );
  };
  let brokerAsked = false;
  try {
    const { args, proxyArgv } = parseOffsetsCommand(argv);
    const config = loadSharedConfig(proxyArgv, env);
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
    const bootstrap = config.bootstrapServers;
    const clusterSide = (): { cluster: ClusterClient; lookups: BrokerLookups } => {
      if (bootstrap.length === 0)
        throw new AdminError('--bootstrap-server is required for cluster transfers', 'bad-input');
      if (cluster === null) {
        cluster = createClusterClient(config, readBrokerTls(config.brokerTls), silentLogger);
        const sasl = config.clusterSasl ? `, SASL ${config.clusterSasl.mechanism}` : '';
        const tls = config.brokerTls ? ', TLS' : '';
        console.error(`cluster: ${bootstrap.map((b) => `${b.host}:${b.port}`).join(',')}${tls}${sasl}`);
      }
      return { cluster, lookups: new BrokerLookups(cluster) };
    };
    const force = args.has('force');
    const dryRun = args.has('dry-run');
    const { audit, actor } = cliAudit(countInStore);
    const change = (c: Pick<AdminChange, 'route' | 'group' | 'targets'>): AdminChange => ({
      ...c,
      actor,
      force,
      dryRun,
    });
    /**
     * Opens the configured store: a read (groups, get, export, a dry run) never creates one, and a
     * write holds an embedded directory against a running proxy. Names the store on stderr.
     */
    const openTheStore = async (): Promise<OffsetStore> => {
      const target = config.storeTarget;
      const writes = !dryRun && (action === 'set' || action === 'delete' || action === 'import');
      if (target.kind === 'embedded') {
        const dir = path.resolve(target.dir);
        if (!writes && !existsSync(path.join(dir, EMBEDDED_DATA_FILE))) {
          throw new NotFound(
            `no embedded store in ${dir} (no ${EMBEDDED_DATA_FILE} there): give the proxy's --data-dir or --store`,
          );
        }
        if (writes) {
          try {
            await checkDataDir(target.dir, config.given.has('store') ? 'store' : 'data-dir');
          } catch (err) {
            if (err instanceof ConfigError) throw new AdminError(err.asFlag(), 'bad-input');
            throw err;
          }
        }
      }
      let opened: OffsetStore;
      try {
        opened = await openStoreTarget(target, {
          operationTimeoutMs: config.storeTimeoutMs,
          ...(writes ? { holder: `offsets ${action}` } : {}),
        });
      } catch (err) {
        if (err instanceof DataDirHeldError)
          throw new AdminError(
            `${err.message}; stop it first, or change offsets through its admin API (docs/admin.md)`,
            'conflict',
          );
        throw err;
      }
      if (writes) counts = opened;
      // Failures name the store's target ("connection refused to h:p"), not the client library's text.
      // The proxy's own records (backends/internal-groups.ts) are not the operator's groups, and
      // a re-created topic's older offsets are none, as at the broker (with the cluster when given).
      store = cliCurrentStore(
        InternalGroupsHidden.over(
          new StoreHealth(opened, {
            target: describeStoreTarget(target),
            endpoints: storeEndpoints(target),
            log: silentLogger,
            pingIntervalMs: MAX_TIMER_MS,
          }),
        ),
        bootstrap.length > 0 ? clusterSide().cluster : null,
        config.requestTimeoutMs,
      );
      console.error(`store: ${target.kind} ${describeStoreTarget(target)}`);
      return store;
    };
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
      if (bootstrap.length === 0) return {};
      const { lookups } = clusterSide();
      brokerAsked = true;
      return { groupIsEmptyAtBroker: (g) => lookups.groupIsEmpty(g) };
    };

    switch (action as Action) {
      case 'groups': {
        const s = await openTheStore();
        const progress = new Progress('groups read');
        const groups = await groupSummaries(s, (d, t) => progress.update(d, t));
        progress.end();
        process.stdout.write(formatGroups(groups, args.has('json')));
        return 0;
      }
      case 'export': {
        const groups = args.get('group');
        const fromCluster = side('from') === 'cluster';
        const source = fromCluster ? clusterSide() : await openTheStore();
        const progress = new Progress('groups exported');
        const onProgress = (d: number, t: number) => progress.update(d, t);
        const lines =
          'lookups' in source
            ? await exportFromCluster(source.cluster, source.lookups, groups, onProgress)
            : await exportFromStore(source, groups, onProgress);
        progress.end();
        // A named group that is not there is a typo until shown otherwise: nothing is written.
        const missing: string[] = [];
        for (const g of new Set(groups ?? [])) {
          if (lines.some((l) => l.group === g)) continue;
          if ('lookups' in source || (await source.getGroup(g)) === null) missing.push(g);
        }
        if (missing.length > 0) {
          const where = fromCluster ? 'the cluster has no committed offset of' : 'the store has no';
          throw new NotFound(
            `${where} group ${missing.map((g) => JSON.stringify(g)).join(', ')}; nothing exported`,
          );
        }
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
        if (all.length === 0 && (await s.getGroup(group)) === null)
          throw new NotFound(`the store has no group ${JSON.stringify(group)}`);
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
    if (err instanceof NotFound) {
      console.error(`kafka-offset-proxy offsets ${action}: ${err.message}`);
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
    await Promise.all(counting);
    await (store as OffsetStore | null)?.close().catch(() => undefined);
  }
}
