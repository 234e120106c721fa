/**
 * The configuration model (config.ts): defaults, one precedence order (flags, environment, the
 * --config file), and errors that name the option, its value (secrets masked) and the accepted
 * form. The documentation and --help generated from OPTIONS, and the startup summary, are tested
 * in cli.test.ts; the process's exit code 2 in test/integration/ops-config.test.ts.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { RELAY_DEFAULTS } from './core/defaults.js';
import { ConfigError, envName, loadConfig, MAX_TIMER_MS, OPTIONS, shownValue } from './config.js';

const BOOT = ['--bootstrap-server', 'k1:9092'];
const dir = mkdtempSync(path.join(os.tmpdir(), 'kop-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let files = 0;
function yamlFile(text: string): string {
  const file = path.join(dir, `c${files++}.yaml`);
  writeFileSync(file, text);
  return file;
}

/** The ConfigError loadConfig throws, for asserting its option and message. */
function refusal(argv: string[], env: NodeJS.ProcessEnv = {}): ConfigError {
  try {
    loadConfig(argv, env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error(`accepted: ${argv.join(' ')}`);
}

describe('defaults', () => {
  test('with only --bootstrap-server every option takes its documented default', () => {
    const c = loadConfig(BOOT, {});
    expect(c.bootstrapServers).toEqual([{ host: 'k1', port: 9092 }]);
    expect(c.listen).toEqual({ host: '127.0.0.1', port: 19092 });
    expect(c).toMatchObject({
      advertisedHost: undefined,
      bindFailure: RELAY_DEFAULTS.bindFailure,
      store: undefined,
      http: undefined,
      httpToken: undefined,
      lag: { intervalMs: 30_000, include: [], exclude: [], maxGroups: 500 },
      metricsApiVersions: true,
      maxFrameSize: RELAY_DEFAULTS.maxFrameSize,
      maxInFlight: RELAY_DEFAULTS.maxInFlight,
      maxConnections: RELAY_DEFAULTS.maxConnections,
      maxBufferedRequestBytes: RELAY_DEFAULTS.maxBufferedRequestBytes,
      maxBufferedResponseBytes: RELAY_DEFAULTS.maxBufferedResponseBytes,
      idleTimeoutMs: RELAY_DEFAULTS.idleTimeoutMs,
      requestTimeoutMs: RELAY_DEFAULTS.requestTimeoutMs,
      shutdownTimeoutMs: RELAY_DEFAULTS.shutdownTimeoutMs,
      clientTls: undefined,
      brokerTls: undefined,
      logLevel: 'info',
      logFormat: undefined,
      storeTimeoutMs: 1500,
      commitGuard: 'fence',
      commitGuardGroups: [],
      unknownTopics: 'reject',
      unknownTopicsGroups: [],
      fallback: 'none',
      mirrorCommits: false,
      authorize: 'broker',
      clusterSasl: undefined,
    });
    expect(c.brokerPorts.size).toBe(0);
    // No --store: the embedded store in --data-dir.
    expect(c.storeTarget.kind).toBe('embedded');
    expect(path.resolve(c.dataDir)).toBe(path.resolve('./kafka-offset-proxy-data'));
    expect([...c.given.keys()]).toEqual(['bootstrap-server']);
  });

  test("every default is accepted by its own option's validation", () => {
    // Giving each default explicitly changes nothing: a default outside its range would fail here.
    // With --http: the lag and metrics options have no effect without it, and are refused alone;
    // with client TLS for the handshake timeout, likewise.
    const clientTls = ['--client-tls-cert', 'server.pem', '--client-tls-key', 'server-key.pem'];
    const base = [...BOOT, '--http', '127.0.0.1:9464', ...clientTls];
    const argv = [...base];
    for (const o of OPTIONS) if (o.default !== undefined) argv.push(`--${o.name}=${o.default}`);
    const explicit = loadConfig(argv, {});
    const { given: _a, ...withDefaults } = loadConfig(base, {});
    const { given: _b, ...withExplicit } = explicit;
    expect(withExplicit).toEqual(withDefaults);
  });
});

describe('precedence: flags, then the environment, then the file', () => {
  test('KOP_ + the option name in upper snake case', () => {
    expect(envName('max-in-flight')).toBe('KOP_MAX_IN_FLIGHT');
    expect(loadConfig([], { KOP_BOOTSTRAP_SERVER: 'e:1', KOP_MAX_IN_FLIGHT: '7' })).toMatchObject({
      bootstrapServers: [{ host: 'e', port: 1 }],
      maxInFlight: 7,
    });
  });

  test('a flag wins over the environment, which wins over the file', () => {
    const file = yamlFile('max-in-flight: 5\nlog-level: warn\ncommit-guard: cas\n');
    const c = loadConfig([...BOOT, '--config', file, '--max-in-flight', '9'], {
      KOP_MAX_IN_FLIGHT: '8',
      KOP_LOG_LEVEL: 'error',
    });
    expect([c.maxInFlight, c.logLevel, c.commitGuard]).toEqual([9, 'error', 'cas']);
  });

  test('an empty environment variable counts as not set', () => {
    expect(loadConfig(BOOT, { KOP_LOG_LEVEL: '' }).logLevel).toBe('info');
  });

  test('--config may come from the environment; YAML lists and maps become the flag forms', () => {
    const file = yamlFile(
      [
        'bootstrap-server: [a:1, b:2]',
        'broker-port: {1: 29092, 2: 29093}',
        'lag-groups-exclude: [tmp-*, test]',
        'http: 127.0.0.1:9464',
        'mirror-commits: true',
      ].join('\n'),
    );
    const c = loadConfig([], { KOP_CONFIG: file });
    expect(c.bootstrapServers).toEqual([
      { host: 'a', port: 1 },
      { host: 'b', port: 2 },
    ]);
    expect([...c.brokerPorts]).toEqual([
      [1, 29092],
      [2, 29093],
    ]);
    expect(c.lag.exclude).toEqual(['tmp-*', 'test']);
    expect(c.mirrorCommits).toBe(true);
    expect(c.given.get('config')).toBe(file);
  });

  test('an empty file is no options', () => {
    expect(loadConfig([...BOOT, '--config', yamlFile('')], {}).maxInFlight).toBe(RELAY_DEFAULTS.maxInFlight);
  });
});

describe('flags', () => {
  test('--name value and --name=value; a bool flag without a value is true', () => {
    const c = loadConfig(
      ['--bootstrap-server=k:1', '--mirror-commits', '--broker-tls', '--max-in-flight', '3'],
      {},
    );
    expect([c.mirrorCommits, c.brokerTls?.insecure, c.maxInFlight]).toEqual([true, false, 3]);
    expect(loadConfig([...BOOT, '--mirror-commits', 'no'], {}).mirrorCommits).toBe(false);
    expect(loadConfig([...BOOT, '--mirror-commits=YES'], {}).mirrorCommits).toBe(true);
  });

  test('0 is allowed where it has a meaning, below the minimum', () => {
    expect(loadConfig([...BOOT, '--idle-timeout-ms', '0', '--lag-interval-ms', '0'], {})).toMatchObject({
      idleTimeoutMs: 0,
      lag: { intervalMs: 0 },
    });
    expect(refusal([...BOOT, '--request-timeout-ms', '0']).key).toBe('request-timeout-ms');
  });

  test('group overrides, patterns and port maps are parsed', () => {
    const c = loadConfig(
      [
        ...BOOT,
        '--commit-guard-group',
        'legacy-*=off, audit=cas',
        '--unknown-topics-group',
        'mirror-*=allow',
        '--broker-port',
        '0=29000',
        '--lag-groups-include',
        'app-*',
        '--http',
        '127.0.0.1:9464',
      ],
      {},
    );
    expect(c.commitGuardGroups).toEqual([
      { pattern: 'legacy-*', mode: 'off' },
      { pattern: 'audit', mode: 'cas' },
    ]);
    expect(c.unknownTopicsGroups).toEqual([{ pattern: 'mirror-*', mode: 'allow' }]);
    expect([...c.brokerPorts]).toEqual([[0, 29000]]);
    expect(c.lag.include).toEqual(['app-*']);
  });

  test('IPv6 listen addresses in brackets; a listen port of 0 means any free port', () => {
    expect(loadConfig([...BOOT, '--listen', '[::1]:0'], {}).listen).toEqual({ host: '::1', port: 0 });
  });

  test('the cluster SASL principal and TLS options, when complete', () => {
    const c = loadConfig(
      [
        ...BOOT,
        '--cluster-sasl-mechanism',
        'SCRAM-SHA-512',
        '--cluster-sasl-username',
        'proxy',
        '--broker-tls',
        '--broker-tls-insecure',
        '--client-tls-cert',
        'c.pem',
        '--client-tls-key',
        'k.pem',
      ],
      { KOP_CLUSTER_SASL_PASSWORD: 'pw' },
    );
    expect(c.clusterSasl).toEqual({ mechanism: 'SCRAM-SHA-512', username: 'proxy', password: 'pw' });
    expect(c.brokerTls).toEqual({ ca: undefined, cert: undefined, key: undefined, insecure: true });
    expect(c.clientTls).toEqual({ cert: 'c.pem', key: 'k.pem', ca: undefined, requireCert: false });
  });
});

describe('validation errors name the option, the value and the accepted form', () => {
  const cases: [string, string[], RegExp][] = [
    ['bootstrap-server', [], /bootstrap-server=null: required: expected host:port/],
    ['bootstrap-server', ['--bootstrap-server', 'k:0'], /port 0 is out of range; expected host:port/],
    ['bootstrap-server', ['--bootstrap-server', 'a:1,,b:2'], /an empty entry/],
    ['listen', [...BOOT, '--listen', 'nohost'], /listen="nohost": "nohost" is not host:port/],
    ['listen', [...BOOT, '--listen', 'bad host:1'], /not host:port/],
    [
      'max-in-flight',
      [...BOOT, '--max-in-flight', '0'],
      /out of range; expected a whole number from 1 to 2147483647$/,
    ],
    [
      'max-frame-size',
      [...BOOT, '--max-frame-size', '1k'],
      /not a whole number; expected a whole number from 1024 to 2147483647 bytes/,
    ],
    [
      'idle-timeout-ms',
      [...BOOT, '--idle-timeout-ms', String(MAX_TIMER_MS + 1)],
      /out of range.*, or 0 \(never\)/,
    ],
    [
      'commit-guard',
      [...BOOT, '--commit-guard', 'strict'],
      /commit-guard="strict": not an allowed value; expected one of fence, cas, off/,
    ],
    ['mirror-commits', [...BOOT, '--mirror-commits=maybe'], /not a boolean; expected true or false/],
    ['commit-guard-group', [...BOOT, '--commit-guard-group', 'g=maybe'], /expected group=fence\|cas\|off/],
    ['commit-guard-group', [...BOOT, '--commit-guard-group', ','], /no override given/],
    ['lag-groups-include', [...BOOT, '--lag-groups-include', 'a,,b'], /an empty name or pattern/],
    ['broker-port', [...BOOT, '--broker-port', '1=2000,2=2000'], /port 2000 is given to nodes 1 and 2/],
    ['broker-port', [...BOOT, '--broker-port', '1=2000,1=2001'], /node 1 is mapped twice/],
    [
      'broker-port',
      [...BOOT, '--listen', '127.0.0.1:2000', '--broker-port', '3=2000'],
      /node 3's port 2000 is the --listen port/,
    ],
    ['advertised-host', [...BOOT, '--advertised-host', 'a b'], /not a host name or IP address/],
    ['max-in-flight', [...BOOT, '--max-in-flight'], /missing value: expected a whole number/],
    ['argument', [...BOOT, 'stray'], /unexpected argument/],
    ['cluster-sasl-username', [...BOOT, '--cluster-sasl-username', 'u'], /needs cluster-sasl-mechanism/],
    [
      'cluster-sasl-password',
      [...BOOT, '--cluster-sasl-mechanism', 'PLAIN', '--cluster-sasl-username', 'u'],
      /required with cluster-sasl-mechanism/,
    ],
    [
      'client-tls-key',
      [...BOOT, '--client-tls-cert', 'c.pem'],
      /client TLS needs both a certificate and a key/,
    ],
    [
      'client-tls-ca',
      [...BOOT, '--client-tls-require-cert'],
      /required when client-tls-require-cert is true/,
    ],
    ['client-tls-ca', [...BOOT, '--client-tls-ca', 'ca.pem'], /needs client-tls-cert and client-tls-key/],
    ['broker-tls-ca', [...BOOT, '--broker-tls-ca', 'ca.pem'], /needs broker-tls true/],
    ['broker-tls-insecure', [...BOOT, '--broker-tls-insecure'], /needs broker-tls true/],
    [
      'store',
      [...BOOT, '--store', 'embedded:/a', '--data-dir', '/b'],
      /names the directory \/a, but --data-dir is \/b/,
    ],
  ];
  for (const [key, argv, message] of cases) {
    test(`${key}: ${argv.slice(BOOT.length).join(' ') || argv.join(' ') || '(nothing)'}`, () => {
      const err = refusal(argv);
      expect(err.key).toBe(key);
      expect(err.message).toMatch(/^invalid configuration: /);
      expect(err.message).toMatch(message);
    });
  }

  test('an error from the environment or the file names the option as well', () => {
    expect(refusal([], { KOP_BOOTSTRAP_SERVER: 'e:1', KOP_MAX_IN_FLIGHT: 'many' }).key).toBe('max-in-flight');
    expect(refusal([...BOOT, '--config', yamlFile('fallback: sideways\n')]).key).toBe('fallback');
  });

  test('an unknown flag shows only its name, never the value (it may be a secret)', () => {
    const err = refusal([...BOOT, '--http-tokn=s3cret']);
    expect(err.key).toBe('http-tokn');
    expect(err.message).toContain('unknown option');
    expect(err.message).not.toContain('s3cret');
  });

  test.each([
    ['short', 'short-7f3a', /shorter than 16 bytes/],
    ['a placeholder (flag)', 'change-me-change-me', /placeholder/],
    ['a placeholder (environment)', 'demo-token-demo-token', /placeholder/],
    ['a placeholder (file)', 'your-secret-token-here', /placeholder/],
    ['empty (flag)', '', /empty/],
  ])('an admin token that is %s is refused, without showing it', (how, token, why) => {
    const err = how.includes('environment')
      ? refusal([], { KOP_BOOTSTRAP_SERVER: 'k:1', KOP_HTTP_TOKEN: token })
      : how.includes('file')
        ? refusal([...BOOT, '--config', yamlFile(`http-token: ${token}\n`)])
        : refusal([...BOOT, `--http-token=${token}`]);
    expect(err.key).toBe('http-token');
    expect(err.message).toMatch(why);
    expect(err.message).toContain('"***"');
    if (token !== '') expect(err.message).not.toContain(token);
  });

  test('a random admin token of 16 bytes or more is taken', () => {
    const argv = [...BOOT, '--http', '127.0.0.1:0', '--http-token', '3b9f0c7e1a2d4f68'];
    expect(loadConfig(argv, {}).httpToken).toBe('3b9f0c7e1a2d4f68');
  });

  test('secrets and store passwords are not shown in errors', () => {
    const token = refusal([...BOOT, '--http-token', 'has space']);
    expect(token.key).toBe('http-token');
    expect(token.message).toContain('"***"');
    expect(token.message).not.toContain('has space');
    expect(shownValue('cluster-sasl-password', 'pw')).toBe('***');
    expect(shownValue('store', 'redis://:hunter2@r:6379')).toBe('redis://:***@r:6379');
    expect(shownValue('listen', '1.2.3.4:5')).toBe('1.2.3.4:5');
    const store = refusal([...BOOT, '--store', 'redis://:hunter2@r:notaport']);
    expect(store.key).toBe('store');
    expect(store.message).not.toContain('hunter2');
  });

  test.each([
    ['mysql://u:pw@h/db', /^expected one of embedded:/],
    ['redis://:pw@h:99999', /port/],
    ['zk://u:pw@', /^expected zk:/],
    ['memory://x', /^expected memory:\/\/$/],
    ['embedded://%zz', /^bad percent-encoding$/],
  ])('--store %s: the parser reason after the URL, shown once and redacted', (url, reason) => {
    const e = refusal([...BOOT, '--store', url]);
    expect(e.key).toBe('store');
    expect(e.reason).toMatch(reason);
    expect(e.reason.startsWith(url)).toBe(false);
    expect(e.message).not.toContain(':pw@');
  });

  test('a --config file that cannot be read, is not YAML, not a mapping, or has unknown keys', () => {
    expect(refusal([...BOOT, '--config', path.join(dir, 'missing.yaml')]).message).toMatch(
      /config=.*cannot read: no such file or directory \(ENOENT\)/,
    );
    expect(refusal([...BOOT, '--config', yamlFile('a: [\n')]).message).toMatch(/not valid YAML/);
    expect(refusal([...BOOT, '--config', yamlFile('- a\n- b\n')]).message).toMatch(/expected a mapping/);
    const unknown = refusal([...BOOT, '--config', yamlFile('http-tokn: s3cret\n')]);
    expect(unknown.key).toBe('http-tokn');
    expect(unknown.message).not.toContain('s3cret');
    expect(refusal([...BOOT, '--config', yamlFile('config: other.yaml\n')]).key).toBe('config');
  });
});
