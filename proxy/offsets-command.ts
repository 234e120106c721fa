/**
 * The `kafka-offset-proxy offsets` command line: each action's usage, the CLI's own flags and
 * switches, and the split of a command line into those and the proxy's own options
 * (SHARED_OPTIONS), which loadConfig reads as the proxy does. offsets-cli.ts runs the actions.
 */
import { describeOption, envName, OPTIONS } from './config.js';
import { AdminError } from './ops/admin/offsets-admin.js';

/** The proxy's own options the CLI takes (flags, KOP_* variables, --config file), one table for both. */
export const SHARED_OPTIONS = [
  'config',
  'store',
  'data-dir',
  'store-timeout-ms',
  'bootstrap-server',
  'request-timeout-ms',
  'broker-tls',
  'broker-tls-ca',
  'broker-tls-cert',
  'broker-tls-key',
  'broker-tls-insecure',
  'cluster-sasl-mechanism',
  'cluster-sasl-username',
  'cluster-sasl-password',
] as const;

function optionHelp(names: readonly string[]): string {
  return names
    .map((name) => {
      const o = OPTIONS.find((spec) => spec.name === name)!;
      const def = o.default !== undefined ? ` (default ${o.default})` : '';
      return `  --${o.name.padEnd(24)} ${envName(o.name).padEnd(28)} ${describeOption(o)}${def}`;
    })
    .join('\n');
}

const STORE_HELP = `Store and cluster: the proxy's own options, as flags, KOP_* variables or keys of --config FILE
(flags win over the environment, which wins over the file):
${optionHelp(SHARED_OPTIONS)}
groups, get, export and dry runs only read: they never create a store (an embedded store's
directory must hold one: exit 3 otherwise). Every command names the store it opened on stderr.`;
const LIVE_HELP = `Refused while the group has live members (consumers running), as Kafka's tools refuse it; with
--bootstrap-server (or KOP_BOOTSTRAP_SERVER) the broker is asked first whether they are still alive.
--force writes anyway: the running consumers keep their positions and commit over it.
--dry-run prints what would change (and what would be refused) and writes nothing.
An embedded store is written by one process at a time: while a proxy runs on the directory, a
write is refused (exit 3) naming it; change offsets through its admin API then (docs/admin.md).`;

/** Each action's usage, printed by `offsets <action> --help`. */
export const ACTIONS = {
  groups: `Usage: kafka-offset-proxy offsets groups [--json] [store options]
Lists the groups in the store: name, number of partitions with an offset, time of the newest commit
(UTC). --json: one JSON object per line instead of columns.
${STORE_HELP}`,
  export: `Usage: kafka-offset-proxy offsets export [--from store|cluster] [--group G]... [--file F]
Writes JSON lines (one per partition, sorted by group, topic, partition) to stdout or F.
--from cluster reads the groups' offsets from the cluster's coordinators (all groups unless named),
which needs --bootstrap-server. A named group the store does not have (--from cluster: with no
committed offset) is exit code 3, and nothing is written. Progress on stderr when it takes more
than a second.
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
export type Action = keyof typeof ACTIONS;

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
Exit codes: 0 done, 2 bad input, 3 conflict (compare-and-set mismatch, group with live members, an
            embedded store held by a running proxy), unknown group (get, export --group) or no
            store where a read looks, 4 store or cluster unavailable.`;

/** The CLI's own flags, which say what to do (the store and the cluster are SHARED_OPTIONS). */
const FLAGS = new Set([
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
const SHARED = new Set<string>(SHARED_OPTIONS);

/**
 * Splits the command line into the CLI's own flags and the proxy's options, which are handed on
 * as `--name=value` to the proxy's own parser (loadConfig), so both read them alike.
 */
function parseArgs(argv: string[]): { args: Map<string, string[]>; proxyArgv: string[] } {
  const args = new Map<string, string[]>();
  const proxyArgv: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const m = /^--([a-z-]+)(?:=(.*))?$/s.exec(arg);
    if (m && SWITCHES.has(m[1]!) && m[2] === undefined) {
      args.set(m[1]!, ['true']);
      continue;
    }
    const name = m?.[1];
    if (name !== undefined && SHARED.has(name)) {
      const spec = OPTIONS.find((o) => o.name === name)!;
      const next = argv[i + 1];
      // A boolean flag may stand alone, as for the proxy.
      const alone = spec.kind === 'bool' && (next === undefined || next.startsWith('--'));
      const value = m![2] ?? (alone ? 'true' : argv[++i]);
      if (value === undefined) throw new AdminError(`--${name} needs a value`, 'bad-input');
      proxyArgv.push(`--${name}=${value}`);
      continue;
    }
    if (name !== undefined && OPTIONS.some((o) => o.name === name))
      throw new AdminError(
        `--${name} is an option of the proxy that offsets does not use (see offsets --help)`,
        'bad-input',
      );
    if (!m || !FLAGS.has(name!)) throw new AdminError(`unknown argument ${JSON.stringify(arg)}`, 'bad-input');
    const value = m[2] ?? argv[++i];
    if (value === undefined) throw new AdminError(`--${name} needs a value`, 'bad-input');
    args.set(name!, [...(args.get(name!) ?? []), value]);
  }
  return { args, proxyArgv };
}

export function integer(
  name: string,
  text: string | undefined,
  min: bigint,
  max = 9223372036854775807n,
): bigint {
  if (text === undefined) throw new AdminError(`--${name} is required`, 'bad-input');
  if (!/^-?\d+$/.test(text) || BigInt(text) < min || BigInt(text) > max) {
    throw new AdminError(
      `--${name}=${JSON.stringify(text)}: expected a whole number from ${min} to ${max}`,
      'bad-input',
    );
  }
  return BigInt(text);
}

/**
 * Checks an offsets command line without running it: the action, the flags, and which switches
 * the action takes. Throws AdminError('bad-input') naming what is wrong.
 */
export function parseOffsetsCommand(argv: string[]): {
  action: Action;
  args: Map<string, string[]>;
  proxyArgv: string[];
} {
  const [action, ...rest] = argv;
  if (action === undefined || !Object.hasOwn(ACTIONS, action)) {
    throw new AdminError(
      `unknown action ${JSON.stringify(action ?? '')} (${Object.keys(ACTIONS).join(', ')}; see offsets --help)`,
      'bad-input',
    );
  }
  const { args, proxyArgv } = parseArgs(rest);
  for (const sw of SWITCHES) {
    if (args.has(sw) && !ACTION_SWITCHES[action as Action].includes(sw)) {
      const where = sw === 'json' ? 'groups' : 'set, delete and import into the store';
      throw new AdminError(`--${sw} applies to ${where} only`, 'bad-input');
    }
  }
  return { action: action as Action, args, proxyArgv };
}
