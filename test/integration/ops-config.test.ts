// The built CLI refuses each invalid configuration with one line naming the option, its value
// (never a secret) and the allowed range or form, and exit code 2, whether the bad value comes
// from a flag, the environment or the YAML file. The table has a bad value for every option of
// OPTIONS (a test fails when an option has none), including the ones only the file system can
// tell (TLS files, the data directory).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, test } from 'vitest';
import { OPTIONS } from '../../proxy/config.js';
import { makeTestCerts } from '../harness/certs.js';
import type { TestCerts } from '../harness/certs.js';
import { ensureBuilt } from '../harness/proxy.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const bin = path.join(repo, 'bin/kafka-offset-proxy.js');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the CLI in a clean environment: KOP_* variables of the developer's shell must not leak in. */
function run(args: string[], env: NodeJS.ProcessEnv = {}, cwd = repo): Promise<Run> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('KOP_')));
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args], { env: { ...base, ...env }, cwd });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

interface Row {
  /** The option the error must name. */
  option: string;
  why: string;
  args: () => string[];
  env?: NodeJS.ProcessEnv;
  /** Text that must not appear anywhere in the output (a secret). */
  secret?: string;
  /** Must be in the one line: the allowed range or form. */
  allowed: RegExp;
}

describe('invalid configuration', () => {
  let dir: string;
  let certs: TestCerts;
  const k = ['--bootstrap-server', 'k:9092'];
  beforeAll(async () => {
    await ensureBuilt();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kop-config-'));
    fs.writeFileSync(path.join(dir, 'not-pem.txt'), 'hello\n');
    fs.writeFileSync(path.join(dir, 'a-file'), 'x');
    certs = makeTestCerts();
    return () => {
      certs.remove();
      fs.rmSync(dir, { recursive: true, force: true });
    };
  });
  const f = (name: string) => path.join(dir, name);
  const yaml = (name: string, text: string): string => {
    fs.writeFileSync(f(name), text);
    return f(name);
  };
  const TIMER = /from 1 to 2147483647 ms/;

  const rows: Row[] = [
    {
      option: 'bootstrap-server',
      why: 'not host:port',
      args: () => ['--bootstrap-server', 'nohostport'],
      allowed: /host:port/,
    },
    {
      option: 'bootstrap-server',
      why: 'port 0',
      args: () => ['--bootstrap-server', 'k:0'],
      allowed: /ports 1 to 65535/,
    },
    {
      option: 'bootstrap-server',
      why: 'missing',
      args: () => ['--http', '127.0.0.1:9464'],
      allowed: /required.*host:port/,
    },
    {
      option: 'listen',
      why: 'port out of range',
      args: () => [...k, '--listen', '127.0.0.1:70000'],
      allowed: /port 0 to 65535/,
    },
    {
      option: 'advertised-host',
      why: 'not a host',
      args: () => [...k, '--advertised-host', 'not a host'],
      allowed: /host name or an IP address/,
    },
    {
      option: 'broker-port',
      why: 'not node=port',
      args: () => [...k, '--broker-port', '1:29092'],
      allowed: /node-id=port/,
    },
    {
      option: 'broker-port',
      why: 'the listen port',
      args: () => [...k, '--broker-port', '1=19092'],
      allowed: /--listen port/,
    },
    {
      option: 'broker-port',
      why: 'one port twice',
      args: () => [...k, '--broker-port', '1=29092,2=29092'],
      allowed: /each port once/,
    },
    {
      option: 'bind-failure',
      why: 'bad enum',
      args: () => [...k, '--bind-failure', 'ignore'],
      allowed: /one of exit, unready/,
    },
    {
      option: 'store',
      why: 'unknown scheme',
      args: () => [...k, '--store', 'mysql://u:pw-in-url@h/db'],
      secret: 'pw-in-url',
      allowed: /expected one of embedded:/,
    },
    {
      option: 'store',
      why: 'redis port',
      args: () => [...k, '--store', 'redis://:redis-secret@h:99999'],
      secret: 'redis-secret',
      allowed: /bad port/,
    },
    {
      option: 'store',
      why: 'redis query password and unknown option',
      args: () => [...k, '--store', 'redis://h:6379?password=q-secret&wiat=1'],
      secret: 'q-secret',
      allowed: /unknown option "wiat"/,
    },
    {
      option: 'store',
      why: 'sentinel without master',
      args: () => [...k, '--store', 'redis+sentinel://u:s-secret@a:26379,b:26379'],
      secret: 's-secret',
      allowed: /master name/,
    },
    {
      option: 'store',
      why: 'cluster with a database',
      args: () => [...k, '--store', 'redis+cluster://:c-secret@a:7000,b:7000/3'],
      secret: 'c-secret',
      allowed: /no databases/,
    },
    {
      option: 'store',
      why: 'zk without port',
      args: () => [...k, '--store', 'zk://user:zk-secret@zk1/kop'],
      secret: 'zk-secret',
      allowed: /bad host:port/,
    },
    {
      option: 'store',
      why: 'memory with a path',
      args: () => [...k, '--store', 'memory://x'],
      allowed: /expected memory:\/\//,
    },
    {
      option: 'store',
      why: 'embedded:<dir> and another --data-dir',
      args: () => [...k, '--store', `embedded:${f('a')}`, '--data-dir', f('b')],
      allowed: /give the directory once/,
    },
    {
      option: 'data-dir',
      why: 'on /proc',
      args: () => [...k, '--data-dir', '/proc/kop-data'],
      allowed: /kernel file system; expected a writable directory/,
    },
    {
      option: 'data-dir',
      why: 'a file',
      args: () => [...k, '--data-dir', f('a-file')],
      allowed: /not a directory; expected a writable directory/,
    },
    {
      option: 'data-dir',
      why: 'below a file',
      args: () => [...k, '--data-dir', path.join(f('a-file'), 'sub')],
      allowed: /not a directory \(ENOTDIR\); expected a writable directory/,
    },
    {
      option: 'store',
      why: 'embedded:<dir> on /proc',
      args: () => [...k, '--store', 'embedded:/proc/kop'],
      allowed: /kernel file system/,
    },
    { option: 'http', why: 'no port', args: () => [...k, '--http', 'localhost'], allowed: /host:port/ },
    {
      option: 'admin-http',
      why: 'no port',
      args: () => [...k, '--http', '127.0.0.1:0', '--admin-http', 'localhost'],
      allowed: /host:port/,
    },
    {
      option: 'config',
      why: 'missing file',
      args: () => ['--config', f('none.yaml')],
      allowed: /no such file.*expected a readable file/,
    },
    {
      option: 'config',
      why: 'not YAML',
      args: () => ['--config', yaml('broken.yaml', 'bootstrap-server: [k:9092\n')],
      allowed: /not valid YAML/,
    },
    {
      option: 'http-tokn',
      why: 'unknown YAML key',
      args: () => [
        '--config',
        yaml('bad-key.yaml', 'bootstrap-server: k:9092\nhttp-tokn: tok-typo-secret\n'),
      ],
      secret: 'tok-typo-secret',
      allowed: /unknown key/,
    },
    {
      option: 'lag-intervall-ms',
      why: 'unknown flag',
      args: () => [...k, '--lag-intervall-ms', '5'],
      allowed: /unknown option/,
    },
    {
      option: 'http-token',
      why: 'a space',
      args: () => [...k, '--http-token', 'tok secret-with-space'],
      secret: 'secret-with-space',
      allowed: /printable ASCII without spaces/,
    },
    {
      option: 'http-token',
      why: 'a placeholder',
      args: () => [...k, '--http-token', 'change-me-change-me'],
      secret: 'change-me-change-me',
      allowed: /a placeholder, not a secret/,
    },
    {
      option: 'http-token',
      why: 'too short',
      args: () => [...k, '--http-token', 'tok-s3cret'],
      secret: 'tok-s3cret',
      allowed: /shorter than 16 bytes/,
    },
    {
      option: 'http-token',
      why: 'empty',
      args: () => [...k, '--http-token='],
      allowed: /empty; expected printable ASCII/,
    },
    {
      option: 'lag-interval-ms',
      why: 'over the timer limit',
      args: () => [...k, '--lag-interval-ms', '3000000000'],
      allowed: /from 1 to 2147483647 ms, or 0 \(lag metrics off\)/,
    },
    {
      option: 'lag-groups-include',
      why: 'empty pattern',
      args: () => [...k, '--lag-groups-include', 'a,,b'],
      allowed: /comma separated/,
    },
    {
      option: 'lag-groups-exclude',
      why: 'no pattern',
      args: () => [...k, '--lag-groups-exclude', ','],
      allowed: /comma separated/,
    },
    {
      option: 'lag-max-groups',
      why: 'zero',
      args: () => [...k, '--lag-max-groups', '0'],
      allowed: /from 1 to 2147483647/,
    },
    {
      option: 'metrics-api-versions',
      why: 'not a boolean',
      args: () => [...k, '--metrics-api-versions', 'maybe'],
      allowed: /true or false/,
    },
    {
      option: 'max-frame-size',
      why: 'too small',
      args: () => [...k, '--max-frame-size', '100'],
      allowed: /from 1024 to 2147483647 bytes/,
    },
    {
      option: 'max-in-flight',
      why: 'negative',
      args: () => [...k, '--max-in-flight', '-1'],
      allowed: /whole number from 1/,
    },
    {
      option: 'max-connections',
      why: 'a fraction',
      args: () => [...k, '--max-connections', '1.5'],
      allowed: /whole number from 1/,
    },
    {
      option: 'max-buffered-request-bytes',
      why: 'zero',
      args: () => [...k, '--max-buffered-request-bytes', '0'],
      allowed: /from 1 to 9007199254740991 bytes/,
    },
    {
      option: 'max-buffered-response-bytes',
      why: 'not a number',
      args: () => [...k, '--max-buffered-response-bytes', '256MiB'],
      allowed: /from 1 to 9007199254740991 bytes/,
    },
    {
      option: 'idle-timeout-ms',
      why: 'over the timer limit',
      args: () => [...k, '--idle-timeout-ms', '2147483648'],
      allowed: /or 0 \(never\)/,
    },
    {
      option: 'request-timeout-ms',
      why: 'zero',
      args: () => [...k, '--request-timeout-ms', '0'],
      allowed: TIMER,
    },
    {
      option: 'shutdown-timeout-ms',
      why: 'over the timer limit',
      args: () => [...k, '--shutdown-timeout-ms', '99999999999'],
      allowed: TIMER,
    },
    {
      option: 'store-timeout-ms',
      why: 'over the timer limit (fired at once)',
      args: () => [...k, '--store-timeout-ms', '3000000000'],
      allowed: TIMER,
    },
    {
      option: 'client-tls-handshake-timeout-ms',
      why: 'zero',
      args: () => [
        ...k,
        '--client-tls-cert',
        certs.files.serverCert,
        '--client-tls-key',
        certs.files.serverKey,
        '--client-tls-handshake-timeout-ms',
        '0',
      ],
      allowed: TIMER,
    },
    {
      option: 'client-tls-cert',
      why: 'missing file',
      args: () => [...k, '--client-tls-cert', f('none.pem'), '--client-tls-key', certs.files.serverKey],
      allowed: /no such file.*readable file/,
    },
    {
      option: 'client-tls-key',
      why: 'not PEM',
      args: () => [...k, '--client-tls-cert', certs.files.serverCert, '--client-tls-key', f('not-pem.txt')],
      allowed: /PEM file with a private key/,
    },
    {
      option: 'client-tls-ca',
      why: 'a directory',
      args: () => [
        ...k,
        '--client-tls-cert',
        certs.files.serverCert,
        '--client-tls-key',
        certs.files.serverKey,
        '--client-tls-ca',
        dir,
      ],
      allowed: /not a regular file/,
    },
    {
      option: 'client-tls-ca',
      why: 'required by require-cert',
      args: () => [
        ...k,
        '--client-tls-cert',
        certs.files.serverCert,
        '--client-tls-key',
        certs.files.serverKey,
        '--client-tls-require-cert',
      ],
      allowed: /required when client-tls-require-cert/,
    },
    {
      option: 'client-tls-require-cert',
      why: 'not a boolean',
      args: () => [...k, '--client-tls-require-cert', 'sometimes'],
      allowed: /true or false/,
    },
    {
      option: 'broker-tls',
      why: 'not a boolean',
      args: () => [...k, '--broker-tls', 'on'],
      allowed: /true or false/,
    },
    {
      option: 'broker-tls-ca',
      why: 'missing file',
      args: () => [...k, '--broker-tls', '--broker-tls-ca', f('none-ca.pem')],
      allowed: /readable file/,
    },
    {
      option: 'broker-tls-ca',
      why: 'without broker-tls',
      args: () => [...k, '--broker-tls-ca', certs.files.ca],
      allowed: /needs broker-tls true/,
    },
    {
      option: 'broker-tls-cert',
      why: 'not PEM',
      args: () => [
        ...k,
        '--broker-tls',
        '--broker-tls-cert',
        f('not-pem.txt'),
        '--broker-tls-key',
        certs.files.clientKey,
      ],
      allowed: /PEM file with a certificate/,
    },
    {
      option: 'broker-tls-key',
      why: "another certificate's key",
      args: () => [
        ...k,
        '--broker-tls',
        '--broker-tls-cert',
        certs.files.clientCert,
        '--broker-tls-key',
        certs.files.otherClientKey,
      ],
      allowed: /not usable with broker-tls-cert/,
    },
    {
      option: 'broker-tls-insecure',
      why: 'not a boolean',
      args: () => [...k, '--broker-tls', '--broker-tls-insecure', 'perhaps'],
      allowed: /true or false/,
    },
    {
      option: 'commit-guard',
      why: 'bad enum',
      args: () => [...k, '--commit-guard', 'maybe'],
      allowed: /one of fence, cas, off/,
    },
    {
      option: 'commit-guard-group',
      why: 'bad mode',
      args: () => [...k, '--commit-guard-group', 'g=strict'],
      allowed: /group-or-pattern=fence\|cas\|off/,
    },
    {
      option: 'unknown-topics',
      why: 'bad enum',
      args: () => [...k, '--unknown-topics', 'ignore'],
      allowed: /one of reject, allow/,
    },
    {
      option: 'unknown-topics-group',
      why: 'bad mode',
      args: () => [...k, '--unknown-topics-group', 'mirror-*=keep'],
      allowed: /group-or-pattern=reject\|allow/,
    },
    {
      option: 'native-relay',
      why: 'bad enum',
      args: () => [...k, '--native-relay', 'always'],
      allowed: /one of auto, on, off/,
    },
    {
      option: 'native-relay',
      why: 'on where connections are TLS',
      args: () => [...k, '--native-relay', 'on', '--broker-tls'],
      allowed: /TLS connections are relayed in JavaScript/,
    },
    {
      option: 'native-relay-after',
      why: 'zero',
      args: () => [...k, '--native-relay-after', '0'],
      allowed: /a whole number from 1 to 2147483647 requests/,
    },
    {
      option: 'fallback',
      why: 'bad enum',
      args: () => [...k, '--fallback', 'broker'],
      allowed: /one of none, upstream/,
    },
    {
      option: 'cluster-sasl-mechanism',
      why: 'unsupported',
      args: () => [...k, '--cluster-sasl-mechanism', 'GSSAPI'],
      allowed: /one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512/,
    },
    {
      option: 'cluster-sasl-username',
      why: 'empty',
      args: () => [...k, '--cluster-sasl-mechanism', 'PLAIN', '--cluster-sasl-username='],
      allowed: /non-empty/,
    },
    {
      option: 'cluster-sasl-password',
      why: 'without a mechanism',
      args: () => [...k],
      env: { KOP_CLUSTER_SASL_PASSWORD: 'sasl-pw-secret' },
      secret: 'sasl-pw-secret',
      allowed: /needs cluster-sasl-mechanism/,
    },
    {
      option: 'authorize',
      why: 'bad enum',
      args: () => [...k, '--authorize', 'acl'],
      allowed: /one of broker, off/,
    },
    {
      option: 'mirror-commits',
      why: 'bad boolean in the environment',
      args: () => [...k],
      env: { KOP_MIRROR_COMMITS: 'perhaps' },
      allowed: /true or false/,
    },
    {
      option: 'log-level',
      why: 'bad value in the YAML file',
      args: () => ['--config', yaml('bad-value.yaml', 'bootstrap-server: k:9092\nlog-level: loud\n')],
      allowed: /one of debug, info, warn, error/,
    },
    {
      option: 'log-format',
      why: 'bad enum',
      args: () => [...k, '--log-format', 'xml'],
      allowed: /one of text, json/,
    },
  ];

  test('every option has a row with a bad value', () => {
    const covered = new Set(rows.map((r) => r.option));
    expect(OPTIONS.map((o) => o.name).filter((name) => !covered.has(name))).toEqual([]);
  });

  test('each bad value: one line naming the option, the value and the allowed form; exit 2; nothing started', async () => {
    const results: { row: Row; r: Run }[] = [];
    // A few at a time: each is a process start.
    for (let i = 0; i < rows.length; i += 4) {
      const batch = rows.slice(i, i + 4);
      results.push(
        ...(await Promise.all(batch.map(async (row) => ({ row, r: await run(row.args(), row.env) })))),
      );
    }
    const wrong: string[] = [];
    for (const { row, r } of results) {
      const lines = r.stderr.trimEnd().split('\n');
      const line = lines[0] ?? '';
      const problems = [
        r.code !== 2 && `exit ${r.code}`,
        r.stdout !== '' && 'stdout not empty',
        lines.length !== 1 && `${lines.length} lines`,
        !line.startsWith(`kafka-offset-proxy: invalid configuration: ${row.option}=`) &&
          'option not named first',
        !row.allowed.test(line) && `no ${row.allowed}`,
        row.secret !== undefined && (r.stderr + r.stdout).includes(row.secret) && 'SECRET SHOWN',
      ].filter(Boolean);
      if (problems.length > 0)
        wrong.push(`${row.option} (${row.why}): ${problems.join(', ')}\n    ${r.stderr.trim()}`);
    }
    // (A start that spins or hangs, as on /proc before, is killed after 30 s: no exit 2.)
    expect(wrong, wrong.join('\n')).toEqual([]);
  }, 240_000);

  test('--help lists every option and exits 0; --version prints the version', async () => {
    const help = await run(['--help']);
    expect(help.code).toBe(0);
    for (const o of OPTIONS) expect(help.stdout).toContain(`--${o.name} `);
    const version = await run(['--version']);
    expect(version.code).toBe(0);
    const pkg = JSON.parse(fs.readFileSync(path.join(repo, 'package.json'), 'utf8')) as { version: string };
    expect(version.stdout).toBe(`kafka-offset-proxy ${pkg.version}\n`);
  });
});
