// Nothing set is silently ignored: the built CLI refuses, with exit code 2 and one line naming the
// variable or option (and the nearest valid name, or the option it needs), a misspelt KOP_*
// variable, flag or YAML key, an empty secret (token, SASL password, store URL or its password)
// from the environment, a flag or the file, and an option that has no effect without another.
// The value of a secret never appears. Known non-option variables of the test bed pass.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, test } from 'vitest';
import { startCli } from '../harness/cli-process.js';
import { ensureBuilt } from '../harness/proxy.js';

interface Row {
  why: string;
  args: string[];
  env?: NodeJS.ProcessEnv;
  /** The YAML file given with --config, if any. */
  yaml?: string;
  /** The line must start with `kafka-offset-proxy: invalid configuration: ` + this. */
  names: string;
  /** And contain this. */
  says: RegExp;
  /** Text that must not appear anywhere in the output. */
  secret?: string;
}

const k = ['--bootstrap-server', 'k:9092'];
const http = ['--http', '127.0.0.1:0'];

const rows: Row[] = [
  // Unknown names, with the nearest valid one.
  {
    why: 'misspelt variable holding a token',
    args: [...k, ...http],
    env: { KOP_HTTP_TOKN: 'typo-secret-0123456789' },
    names: 'KOP_HTTP_TOKN=',
    says: /unknown environment variable.*did you mean KOP_HTTP_TOKEN\?$/,
    secret: 'typo-secret-0123456789',
  },
  {
    why: 'misspelt variable of an ordinary option',
    args: k,
    env: { KOP_LOGLEVEL: 'debug' },
    names: 'KOP_LOGLEVEL=',
    says: /did you mean KOP_LOG_LEVEL\?$/,
  },
  {
    why: 'unknown variable, nothing close',
    args: k,
    env: { KOP_ENABLE_EVERYTHING: '1' },
    names: 'KOP_ENABLE_EVERYTHING=',
    says: /unknown environment variable \(the KOP_ variables are the options of --help\)$/,
  },
  {
    why: 'Kubernetes service link',
    args: k,
    env: { KOP_PROXY_SERVICE_PORT: '9464' },
    names: 'KOP_PROXY_SERVICE_PORT=',
    says: /enableServiceLinks: false/,
  },
  {
    why: 'misspelt flag',
    args: [...k, '--http-tokn=typo-flag-secret'],
    names: 'http-tokn="--http-tokn"',
    says: /unknown option.*did you mean --http-token\?$/,
    secret: 'typo-flag-secret',
  },
  {
    why: 'misspelt YAML key',
    args: k,
    yaml: 'http: 127.0.0.1:0\nhttp-tokn: typo-yaml-secret\n',
    names: 'http-tokn=',
    says: /unknown key in .*did you mean http-token\?$/,
    secret: 'typo-yaml-secret',
  },
  // Empty secrets.
  {
    why: 'empty token in the environment',
    args: [...k, ...http],
    env: { KOP_HTTP_TOKEN: '' },
    names: 'KOP_HTTP_TOKEN=""',
    says: /empty: this option holds a secret/,
  },
  {
    why: 'empty token flag',
    args: [...k, ...http, '--http-token='],
    names: 'http-token="***"',
    says: /empty/,
  },
  {
    why: 'token key without a value in the YAML file',
    args: k,
    yaml: 'http: 127.0.0.1:0\nhttp-token:\n',
    names: 'http-token="***"',
    says: /empty/,
  },
  {
    why: 'empty SASL password in the environment',
    args: [...k, '--cluster-sasl-mechanism', 'PLAIN', '--cluster-sasl-username', 'proxy'],
    env: { KOP_CLUSTER_SASL_PASSWORD: '' },
    names: 'KOP_CLUSTER_SASL_PASSWORD=""',
    says: /empty: this option holds a secret/,
  },
  {
    why: 'empty store URL in the environment (would be the embedded store)',
    args: k,
    env: { KOP_STORE: '' },
    names: 'KOP_STORE=""',
    says: /empty: this option holds a secret/,
  },
  {
    why: 'empty store URL in the YAML file',
    args: k,
    yaml: 'store: ""\n',
    names: 'store=""',
    says: /empty/,
  },
  {
    why: 'store URL whose password variable was unset',
    args: [...k, '--store', 'redis://:@redis:6379/0'],
    names: 'store=',
    says: /the password is empty \(an unset variable in the URL\?\)/,
  },
  {
    why: 'store URL with an empty password parameter',
    args: [...k, '--store', 'redis://redis:6379/0?password='],
    names: 'store=',
    says: /the password is empty/,
  },
  {
    why: 'ZooKeeper URL with an empty password',
    args: [...k, '--store', 'zk://kop:@zk:2181/kop'],
    names: 'store=',
    says: /the password is empty/,
  },
  // Options that need another.
  {
    why: 'token flag without --http',
    args: [...k, '--http-token', 'flag-token-secret-0123'],
    names: 'http-token="***"',
    says: /has no effect without http/,
    secret: 'flag-token-secret-0123',
  },
  {
    why: 'token variable without KOP_HTTP',
    args: k,
    env: { KOP_HTTP_TOKEN: 'env-token-secret-0123' },
    names: 'http-token="***"',
    says: /has no effect without http/,
    secret: 'env-token-secret-0123',
  },
  {
    why: 'token in the YAML file without http',
    args: k,
    yaml: 'http-token: yaml-token-secret-0123\n',
    names: 'http-token="***"',
    says: /has no effect without http/,
    secret: 'yaml-token-secret-0123',
  },
  {
    why: 'admin listener without --http',
    args: [...k, '--admin-http', '127.0.0.1:0'],
    names: 'admin-http="127.0.0.1:0"',
    says: /has no effect without http/,
  },
  {
    why: 'lag interval without --http',
    args: [...k, '--lag-interval-ms', '5000'],
    names: 'lag-interval-ms="5000"',
    says: /has no effect without http/,
  },
  {
    why: 'lag group filter without --http',
    args: k,
    env: { KOP_LAG_GROUPS_EXCLUDE: 'tmp-*' },
    names: 'lag-groups-exclude="tmp-*"',
    says: /has no effect without http/,
  },
  {
    why: 'metrics option without --http',
    args: [...k, '--metrics-api-versions', 'false'],
    names: 'metrics-api-versions="false"',
    says: /has no effect without http/,
  },
  {
    why: 'lag group limit with lag off',
    args: [...k, ...http, '--lag-interval-ms', '0', '--lag-max-groups', '10'],
    names: 'lag-max-groups="10"',
    says: /has no effect with lag-interval-ms 0/,
  },
  {
    why: 'native relay threshold with the native relay off',
    args: [...k, '--native-relay', 'off', '--native-relay-after', '4'],
    names: 'native-relay-after="4"',
    says: /has no effect with native-relay off/,
  },
  {
    why: 'TLS handshake timeout without client TLS',
    args: [...k, '--client-tls-handshake-timeout-ms', '3000'],
    names: 'client-tls-handshake-timeout-ms="3000"',
    says: /has no effect without client-tls-cert/,
  },
  {
    why: 'client TLS key without its certificate',
    args: [...k, '--client-tls-key', '/nonexistent/key.pem'],
    names: 'client-tls-cert=null',
    says: /client TLS needs both a certificate and a key/,
  },
  // A known non-option variable passes: the refusal is of the next problem, the bad log level.
  {
    why: 'test bed variable accepted',
    args: [...k, '--log-level', 'loud'],
    env: { KOP_BOOTSTRAP: 'elsewhere:9092', KOP_TEST_LOG: '1' },
    names: 'log-level="loud"',
    says: /not an allowed value/,
  },
];

describe('nothing set is silently ignored', () => {
  let dir: string;
  beforeAll(async () => {
    await ensureBuilt();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kop-config-strict-'));
    return () => fs.rmSync(dir, { recursive: true, force: true });
  });

  test('each: exit 2, one line naming the variable or option and what is wrong, no secret shown', async () => {
    const wrong: string[] = [];
    // A few at a time: each is a process start. The working directory is empty: no store is made.
    for (let i = 0; i < rows.length; i += 4) {
      await Promise.all(
        rows.slice(i, i + 4).map(async (row, j) => {
          const args = [...row.args];
          if (row.yaml !== undefined) {
            const file = path.join(dir, `row-${i + j}.yaml`);
            fs.writeFileSync(file, row.yaml);
            args.push('--config', file);
          }
          const cli = startCli(args, row.env, dir);
          const timer = setTimeout(() => cli.child.kill('SIGKILL'), 30_000);
          const code = await cli.exited;
          clearTimeout(timer);
          const out = cli.output();
          const lines = out.trimEnd().split('\n');
          const problems = [
            code !== 2 && `exit ${code}`,
            lines.length !== 1 && `${lines.length} lines`,
            !lines[0]!.startsWith(`kafka-offset-proxy: invalid configuration: ${row.names}`) &&
              'not named first',
            !row.says.test(lines[0]!) && `no ${row.says}`,
            row.secret !== undefined && out.includes(row.secret) && 'SECRET SHOWN',
          ].filter(Boolean);
          if (problems.length > 0) wrong.push(`${row.why}: ${problems.join(', ')}\n    ${out.trim()}`);
        }),
      );
    }
    expect(wrong, wrong.join('\n')).toEqual([]);
    // Nothing was created where the CLI ran (no embedded store opened), but the YAML files.
    expect(fs.readdirSync(dir).filter((f) => !f.endsWith('.yaml'))).toEqual([]);
  }, 300_000);
});
