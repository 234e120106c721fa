/**
 * `kafka-offset-proxy offsets <action>`: operator commands on the offset store.
 *
 *   export  [--from store|cluster] [--group G ...] [--file F]      JSON lines to stdout or F
 *   import  [--to store|cluster] [--file F] [--force]              JSON lines from stdin or F
 *   get     --group G [--topic T]
 *   set     --group G --topic T --partition P --offset O [--expected E] [--metadata M] [--force]
 *   delete  --group G [--topic T --partition P] [--force]
 *
 * The store is chosen as for the proxy (--store URL, --data-dir, or the KOP_* environment);
 * cluster transfers need --bootstrap-server. Writes to the store are refused while the group has
 * live members, as Kafka's tools are (checked with the broker when --bootstrap-server is given),
 * unless --force. Exit codes: 0 done, 2 bad input, 3 conflict (compare-and-set mismatch, group
 * with live members, refused import), 4 store or cluster unavailable.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { StoreCorruptError, StoreUnavailableError } from '../../backends/errors.js';
import { openStore } from '../../backends/open-store.js';
import type { OffsetStore } from '../../backends/store.js';
import { BrokerMap, parseHostPortList } from '../broker-map.js';
import { ClusterClient } from '../cluster-client.js';
import { BrokerLookups } from '../offsets/broker-lookups.js';
import type { AdminGuard } from './offsets-admin.js';
import {
  AdminError,
  deleteOffsets,
  exportFromCluster,
  exportFromStore,
  formatLines,
  getOffsets,
  GroupNotEmptyError,
  importToCluster,
  importToStore,
  parseLines,
  setOffset,
} from './offsets-admin.js';

export const OFFSETS_USAGE = `Usage: kafka-offset-proxy offsets <export|import|get|set|delete> [options]
  export  [--from store|cluster] [--group G]... [--file F]   write JSON lines (sorted) to stdout or F
  import  [--to store|cluster] [--file F] [--force]          read JSON lines from stdin or F
  get     --group G [--topic T]                              print a group's stored offsets
  set     --group G --topic T --partition P --offset O [--expected E] [--metadata M] [--force]
                                                             set one offset; with --expected, only if it is E (-1 = none)
  delete  --group G [--topic T --partition P] [--force]      delete a group's offsets, or one partition's
Writes to the store are refused while the group has live members (consumers running), as Kafka's
tools refuse them; with --bootstrap-server the broker is asked first whether they are still alive.
--force writes anyway: the running consumers keep their positions and commit over it.
Store: --store URL (default: the embedded store in --data-dir, default ./kafka-offset-proxy-data),
       --store-timeout-ms N; environment KOP_STORE, KOP_DATA_DIR.
Cluster: --bootstrap-server host:port,... (environment KOP_BOOTSTRAP_SERVER)
Exit codes: 0 done, 2 bad input, 3 conflict (compare-and-set mismatch, group with live members),
            4 store or cluster unavailable.`;

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
const SWITCHES = new Set(['force']);

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

function integer(name: string, text: string | undefined, min: bigint): bigint {
  if (text === undefined) throw new AdminError(`--${name} is required`, 'bad-input');
  if (!/^-?\d+$/.test(text) || BigInt(text) < min || BigInt(text) > 9223372036854775807n) {
    throw new AdminError(`--${name}=${JSON.stringify(text)}: expected a whole number >= ${min}`, 'bad-input');
  }
  return BigInt(text);
}

const EXIT = { 'bad-input': 2, conflict: 3, unavailable: 4 } as const;

export async function offsetsMain(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const [action, ...rest] = argv;
  if (action === undefined || action === '--help' || action === '-h') {
    console.log(OFFSETS_USAGE);
    return action === undefined ? 2 : 0;
  }
  let store: OffsetStore | null = null;
  let cluster: ClusterClient | null = null;
  let brokerAsked = false;
  try {
    if (!['export', 'import', 'get', 'set', 'delete'].includes(action)) {
      throw new AdminError(
        `unknown action ${JSON.stringify(action)} (export, import, get, set, delete)`,
        'bad-input',
      );
    }
    const args = parseArgs(rest);
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
      store = await openStore(one('store') ?? env['KOP_STORE'], {
        dataDir: one('data-dir') ?? env['KOP_DATA_DIR'] ?? './kafka-offset-proxy-data',
        operationTimeoutMs:
          timeoutText === undefined ? 5000 : Number(integer('store-timeout-ms', timeoutText, 1n)),
      });
      return store;
    };
    const force = args.has('force');
    const forcible =
      action === 'set' || action === 'delete' || (action === 'import' && side('to') === 'store');
    if (force && !forcible)
      throw new AdminError('--force applies to set, delete and import into the store only', 'bad-input');
    /** Live members refuse a write unless --force; the broker, when given, is asked before a refusal. */
    const guard = (): AdminGuard => {
      if (force) return { force };
      if (!bootstrap) return {};
      const { lookups } = clusterSide();
      brokerAsked = true;
      return { groupIsEmptyAtBroker: (g) => lookups.groupIsEmpty(g) };
    };

    switch (action) {
      case 'export': {
        const groups = args.get('group');
        const lines =
          side('from') === 'cluster'
            ? await (() => {
                const c = clusterSide();
                return exportFromCluster(c.cluster, c.lookups, groups);
              })()
            : await exportFromStore(await openTheStore(), groups);
        const file = one('file');
        if (file) writeFileSync(file, formatLines(lines));
        else process.stdout.write(formatLines(lines));
        console.error(`exported ${lines.length} offsets`);
        return 0;
      }
      case 'import': {
        const file = one('file');
        const lines = parseLines(file ? readFileSync(file, 'utf8') : readFileSync(0, 'utf8'));
        const n =
          side('to') === 'cluster'
            ? await importToCluster(clusterSide().lookups, lines)
            : await importToStore(await openTheStore(), lines, guard());
        console.error(`imported ${n} offsets`);
        return 0;
      }
      case 'get': {
        process.stdout.write(
          formatLines(await getOffsets(await openTheStore(), required('group'), one('topic'))),
        );
        return 0;
      }
      case 'set': {
        const group = required('group');
        const topic = required('topic');
        const partition = Number(integer('partition', one('partition'), 0n));
        const offset = integer('offset', one('offset'), 0n);
        const expectedText = one('expected');
        const metadata = one('metadata');
        await setOffset(
          await openTheStore(),
          {
            group,
            topic,
            partition,
            offset,
            ...(expectedText !== undefined ? { expected: integer('expected', expectedText, -1n) } : {}),
            ...(metadata !== undefined ? { metadata } : {}),
          },
          guard(),
        );
        console.error(`set ${group} ${topic}-${partition} to ${offset}`);
        return 0;
      }
      default: {
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
            : [{ topic, partition: Number(integer('partition', partitionText, 0n)) }];
        await deleteOffsets(await openTheStore(), group, partitions, guard());
        console.error(partitions ? `deleted ${group} ${topic}-${partitionText}` : `deleted group ${group}`);
        return 0;
      }
    }
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
