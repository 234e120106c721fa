/**
 * KOP_* variables are the proxy's options, so a misspelt one (KOP_HTTP_TOKN=...) must stop the
 * start as a misspelt flag does, instead of leaving the option at its default (an open admin API,
 * in that example). And an empty value for an option that carries a secret (KOP_HTTP_TOKEN=, an
 * empty Kubernetes Secret, KOP_STORE from an unset shell variable) is refused: for other options
 * an empty variable means unset, but an empty secret is a deployment mistake that would otherwise
 * start the proxy without the protection the operator meant to give it.
 */

/** Why a variable was refused; config.ts turns it into its ConfigError (variable name as the key). */
export interface EnvProblem {
  variable: string;
  /** The value as it may be shown (never a secret: an unknown variable's is not shown at all). */
  shown: string;
  why: string;
}

/**
 * KOP_* variables that are not options, with why each exists. The proxy ignores them. They are
 * set for the test bed, the tests and the benchmarks, never read by the proxy, but the proxy
 * processes those tests start inherit the developer's environment (`KOP_BOOTSTRAP=host:port npm
 * test` must not stop every proxy the suite starts). test/unit/env-strict.test.ts fails when the
 * repository uses a KOP_ variable that is neither an option nor listed here.
 */
export const KNOWN_NON_OPTION_VARIABLES: ReadonlyMap<string, string> = new Map([
  // The test bed (test/bed/): which cluster and programs the integration tests use.
  ['KOP_BOOTSTRAP', 'test bed: an existing Kafka cluster instead of the bed broker'],
  ['KOP_KAFKA_VERSION', 'test bed: the version of the KOP_BOOTSTRAP cluster'],
  ['KOP_CACHE_DIR', 'test bed: cache of Kafka jars, client builds and helm'],
  ['KOP_BED_DIR', 'test bed: directory of the running components'],
  ['KOP_BED_KEEP', 'test bed: keep the directories of the components after the run'],
  ['KOP_BED_NO_PDEATHSIG', 'test bed: do not tie components to the test process'],
  ['KOP_ZOOKEEPER_JARS', 'test bed: where the ZooKeeper jars are'],
  ['KOP_REDIS_SERVER', 'test bed: the redis-server program'],
  ['KOP_REDIS_CLI', 'test bed: the redis-cli program'],
  ['KOP_VALKEY_SERVER', 'test bed: the valkey-server program (WAITAOF tests)'],
  ['KOP_PYTHON', 'test bed: the Python of the confluent-kafka client tests'],
  ['KOP_KCAT', 'test bed: the kcat program'],
  ['KOP_HELM', 'test bed: the helm program of the deployment tests'],
  // The tests: debugging output and generated files.
  ['KOP_TEST_LOG', 'tests: log of in-process proxies'],
  ['KOP_UPDATE_DOCS', 'tests: rewrite the generated options table of docs/configuration.md'],
  ['KOP_UPDATE_DEPLOY', 'tests: rewrite the rendered Kubernetes manifest (npm run deploy:render)'],
  ['KOP_DIFF_DEBUG', 'tests: trace of the commit-guard differential test'],
  ['KOP_VR_DEBUG', 'tests: progress of the verifiable-run reliability tool'],
  ['KOP_TEST_EMBEDDED_DIR', 'tests: the directory a child process of an embedded-store test opens'],
  ['KOP_RELAY_ADDON', 'tests: the native relay build the tests load (the sanitizer build)'],
  // The tests: sizes and seeds of the long-running reliability and fuzz tests.
  ['KOP_FUZZ_FRAMES', 'tests: connections of the wire fuzz test'],
  ['KOP_FUZZ_SEED', 'tests: seed of the wire fuzz test'],
  ['KOP_FUZZ_CONCURRENCY', 'tests: concurrency of the wire fuzz test'],
  ['KOP_FUZZ_RSS_GROWTH_MB', 'tests: memory growth the wire fuzz test allows'],
  ['KOP_FUZZ_NODE_ARGS', 'tests: node options of the proxy the wire fuzz test starts'],
  ['KOP_GUARD_DIFF_RUNS', 'tests: scripts of the commit-guard differential test'],
  ['KOP_GUARD_DIFF_SEED', 'tests: seed of the commit-guard differential test'],
  ['KOP_GUARD_DIFF_VERBOSE', 'tests: print every streams-group differential script and its answers'],
  ['KOP_LIMITS_DEFAULT_STORM', 'tests: connections the default-limit storm opens (10,500)'],
  ['KOP_LIMITS_TLS_STORM', 'tests: connections of the TLS handshake storm (1,500)'],
  ['KOP_LOAD_SECONDS', 'tests: length of the load reliability test'],
  ['KOP_LIMITS_STORM', 'tests: connections of the connection-storm test'],
  ['KOP_LIMITS_STALLERS', 'tests: stalled clients of the limits test'],
  ['KOP_UNREAD_REQUESTS', 'tests: requests per client of the unread-responses test'],
  ['KOP_UNREAD_CLIENTS', 'tests: clients of the unread-responses test'],
  ['KOP_IDLE_CONNECTIONS', 'tests: idle connections of the unread-responses test'],
  // The benchmarks (bench/).
  ['KOP_BENCH_REDIS_URL', 'benchmarks: a running Redis to measure'],
  ['KOP_BENCH_ZK_URL', 'benchmarks: a running ZooKeeper to measure'],
]);

/** Variables Kubernetes injects for a Service named kop-... when enableServiceLinks is on. */
const SERVICE_LINK =
  /_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_\d+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)?)$/;

/**
 * The first KOP_* variable of `env` that is neither an option's (`optionVariables`) nor a known
 * non-option variable, or the first option variable set empty whose option is a secret.
 */
export function environmentProblem(
  env: NodeJS.ProcessEnv,
  optionVariables: ReadonlySet<string>,
  secretVariables: ReadonlySet<string>,
  nearest: (variable: string) => string | undefined,
): EnvProblem | undefined {
  // Sorted: the same environment always names the same variable first.
  for (const variable of Object.keys(env).sort()) {
    if (!variable.startsWith('KOP_')) continue;
    const value = env[variable];
    if (optionVariables.has(variable)) {
      if (value === '' && secretVariables.has(variable))
        return {
          variable,
          shown: '',
          why: 'empty: this option holds a secret, and an empty one is a mistake (an unset variable or an empty Secret); give it a value or remove the variable',
        };
      continue;
    }
    if (KNOWN_NON_OPTION_VARIABLES.has(variable)) continue;
    const guess = nearest(variable);
    const hint =
      guess !== undefined
        ? `; did you mean ${guess}?`
        : SERVICE_LINK.test(variable)
          ? '; it looks like a Kubernetes service link of a Service named kop-...: set enableServiceLinks: false in the pod'
          : '';
    // The value is not shown: a misspelt KOP_HTTP_TOKN holds a token.
    return {
      variable,
      shown: '(not shown)',
      why: `unknown environment variable (the KOP_ variables are the options of --help)${hint}`,
    };
  }
  return undefined;
}
