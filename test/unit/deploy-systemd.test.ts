// The systemd unit and its environment file, read the way systemd reads them: the ExecStart command
// line and the environment go through the proxy's own OPTIONS and loadConfig, the unit through
// `systemd-analyze verify`. Running that command line against Kafka is test/integration/deploy.test.ts.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import {
  execStart,
  parseUnit,
  proxyConfig,
  REPO,
  SYSTEMD_DIR,
  unitEnvironment,
  unitSettings,
  unknownFlags,
  unknownOptionVariables,
} from '../harness/deploy.js';

const UNIT_FILE = path.join(SYSTEMD_DIR, 'kafka-offset-proxy.service');
const ENV_FILE = path.join(SYSTEMD_DIR, 'kafka-offset-proxy.env');
const INSTALL_ROOT = '/opt/kafka-offset-proxy';

describe('systemd unit', () => {
  const text = fs.readFileSync(UNIT_FILE, 'utf8');
  const unit = parseUnit(text);
  const one = (key: string): string => {
    const values = unitSettings(unit, 'Service', key);
    expect(values, key).toHaveLength(1);
    return values[0]!;
  };
  const environment = () =>
    unitEnvironment(unit, (file) => {
      expect(file).toBe('/etc/kafka-offset-proxy/kafka-offset-proxy.env');
      return ENV_FILE;
    });

  test('ExecStart runs the CLI of the installed checkout, with options the proxy accepts', () => {
    const [node, script, ...args] = execStart(unit);
    expect(path.isAbsolute(node!)).toBe(true);
    expect(path.basename(node!)).toBe('node');
    expect(script!.startsWith(`${INSTALL_ROOT}/`)).toBe(true);
    expect(fs.existsSync(path.join(REPO, path.relative(INSTALL_ROOT, script!)))).toBe(true);
    expect(unknownFlags(args)).toEqual([]);
    const env = environment();
    expect(unknownOptionVariables(env)).toEqual([]);
    const config = proxyConfig(args, env);
    expect(config.store, 'the env file keeps offsets in the embedded store').toBeUndefined();
    expect(config.http, 'the HTTP endpoint is on').toBeDefined();
    // No usable token is shipped: the proxy starts with admin writes refused until one is set.
    expect(config.httpToken).toBeUndefined();
    expect(fs.readFileSync(ENV_FILE, 'utf8')).toMatch(/^#KOP_HTTP_TOKEN=$/m);
  });

  test('the commented admin address, once uncommented, puts /admin apart from KOP_HTTP on this machine', () => {
    const [, , ...args] = execStart(unit);
    const example = /^#KOP_ADMIN_HTTP=(\S+)$/m.exec(fs.readFileSync(ENV_FILE, 'utf8'));
    expect(example, 'a commented KOP_ADMIN_HTTP example').not.toBeNull();
    const env = { ...environment(), KOP_ADMIN_HTTP: example![1]! };
    expect(unknownOptionVariables(env)).toEqual([]);
    const config = proxyConfig(args, env);
    expect(config.adminHttp?.host, 'the admin API stays on this machine').toBe('127.0.0.1');
    expect(config.adminHttp?.port).not.toBe(config.http?.port);
  });

  test('a dedicated user owns the data directory, which is the embedded store and the working directory', () => {
    const user = one('User');
    expect(user).not.toBe('root');
    expect(one('Group')).toBe(user);
    const sysusers = fs.readFileSync(path.join(SYSTEMD_DIR, 'kafka-offset-proxy.sysusers'), 'utf8');
    expect(sysusers).toMatch(new RegExp(`^u ${user} `, 'm'));
    const stateDir = `/var/lib/${one('StateDirectory')}`;
    expect(one('WorkingDirectory')).toBe(stateDir);
    expect(proxyConfig([], environment()).dataDir).toBe(stateDir);
  });

  test('hardening, restart policy and limits fit the proxy', () => {
    for (const [key, value] of [
      ['NoNewPrivileges', 'yes'],
      ['ProtectSystem', 'strict'],
      ['ProtectHome', 'yes'],
      ['PrivateTmp', 'yes'],
      ['PrivateDevices', 'yes'],
      ['CapabilityBoundingSet', ''],
      ['Restart', 'on-failure'],
    ]) {
      expect(one(key!), key).toBe(value);
    }
    // V8's JIT writes executable memory: MemoryDenyWriteExecute=yes would kill node at start.
    expect(unitSettings(unit, 'Service', 'MemoryDenyWriteExecute')).not.toContain('yes');
    // Exit code 2 is a configuration error (docs/configuration.md): restarting cannot help.
    expect(one('RestartPreventExitStatus').split(/\s+/)).toContain('2');
    const config = proxyConfig([], environment());
    expect(Number(one('TimeoutStopSec')) * 1000).toBeGreaterThan(config.shutdownTimeoutMs);
    // Each client connection holds two descriptors (client and broker side).
    expect(Number(one('LimitNOFILE'))).toBeGreaterThan(2 * config.maxConnections);
  });

  test("systemd-sysusers creates the unit's user and group from the sysusers.d file", () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'kop-sysusers-'));
    try {
      // --root: an empty system, so the answer does not depend on this machine's users; nothing is written.
      const r = spawnSync(
        'systemd-sysusers',
        [`--root=${root}`, '--dry-run', path.join(SYSTEMD_DIR, 'kafka-offset-proxy.sysusers')],
        { encoding: 'utf8', timeout: 30_000 },
      );
      expect(r.error, 'systemd-sysusers must be installed (Debian package systemd)').toBeUndefined();
      expect(r.status, r.stderr).toBe(0);
      const user = one('User');
      expect(r.stderr + r.stdout).toContain(`Creating group '${one('Group')}'`);
      expect(r.stderr + r.stdout).toContain(`Creating user '${user}'`);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  test('systemd-analyze verify accepts the unit', () => {
    // The unit names Debian's /usr/bin/node; verify checks that ExecStart's binary exists, so the
    // copy under test runs this test's node instead.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kop-systemd-'));
    try {
      const copy = path.join(dir, 'kafka-offset-proxy.service');
      const [node] = execStart(unit);
      fs.writeFileSync(copy, text.replace(`ExecStart=${node} `, `ExecStart=${process.execPath} `));
      const r = spawnSync('systemd-analyze', ['verify', copy], { encoding: 'utf8', timeout: 30_000 });
      expect(r.error, 'systemd-analyze must be installed (Debian package systemd)').toBeUndefined();
      expect(r.stderr + r.stdout).toBe('');
      expect(r.status).toBe(0);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
