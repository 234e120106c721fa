// What each signal does to the real CLI (docs/deploy.md, "Signals"): SIGHUP reloads the log
// level, the admin token and the client TLS certificate from the --config file and the TLS files,
// logs what it reloaded and what needs a restart, and never ends the process; SIGUSR1 does not
// open Node's inspector (checked against a plain node process, where it does); SIGUSR2 and SIGQUIT
// are logged and ignored; a second SIGTERM ends the process even while process.exit() waits for a
// thread-pool thread that hangs (as a DNS lookup against a dead resolver does).
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes, X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { freePort } from '../bed/ports.js';
import { makeTestCerts } from '../harness/certs.js';
import type { TestCerts } from '../harness/certs.js';
import { startCli } from '../harness/cli-process.js';
import type { CliProcess } from '../harness/cli-process.js';
import { ensureBuilt, freePortRange } from '../harness/proxy.js';

const kafka = inject('kafkaBootstrap');
let dir: string;
let certs: TestCerts;

beforeAll(async () => {
  await ensureBuilt();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kop-signals-'));
  certs = makeTestCerts();
}, 120_000);

afterAll(() => {
  certs?.remove();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

const token = (): string => randomBytes(16).toString('hex');

/** The proxy on free ports with the memory store; resolves once the HTTP endpoint listens. */
async function start(
  extra: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ cli: CliProcess; port: number; http: string }> {
  const port = await freePortRange();
  const http = `127.0.0.1:${await freePort()}`;
  const cli = startCli(
    [
      ...['--bootstrap-server', kafka, '--listen', `127.0.0.1:${port}`, '--store', 'memory://'],
      ...['--http', http, '--log-format', 'json', ...extra],
    ],
    env,
    dir,
  );
  await cli.waitFor(/"event":"http listening"/);
  return { cli, port, http };
}

async function metricsStatus(http: string, bearer: string): Promise<number> {
  return (await fetch(`http://${http}/metrics`, { headers: { authorization: `Bearer ${bearer}` } })).status;
}

/** The SHA-256 fingerprint of the certificate the TLS listener serves now (a new connection). */
function servedFingerprint(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
      const fp = socket.getPeerX509Certificate()!.fingerprint256;
      socket.end();
      resolve(fp);
    });
    socket.once('error', reject);
  });
}

/** The lines logged after `from` characters of output, parsed. */
function linesAfter(cli: CliProcess, from: number): Record<string, unknown>[] {
  return cli
    .output()
    .slice(from)
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('signals', () => {
  test('SIGHUP reloads the log level, the token and the client TLS certificate; names what needs a restart', async () => {
    const [t1, t2] = [token(), token()];
    const config = path.join(dir, 'reload.yaml');
    const cert = path.join(dir, 'tls-cert.pem');
    const key = path.join(dir, 'tls-key.pem');
    fs.copyFileSync(certs.files.serverCert, cert);
    fs.copyFileSync(certs.files.serverKey, key);
    fs.writeFileSync(config, `log-level: info\nhttp-token: ${t1}\n`);
    const { cli, port, http } = await start([
      '--config',
      config,
      '--client-tls-cert',
      cert,
      '--client-tls-key',
      key,
    ]);
    try {
      expect(await metricsStatus(http, t1)).toBe(200);
      const fingerprint = (pem: Buffer) => new X509Certificate(pem).fingerprint256;
      expect(await servedFingerprint(port)).toBe(fingerprint(certs.serverCert));
      // At info, a connection closing logs nothing.
      await servedFingerprint(port);
      await new Promise((r) => setTimeout(r, 300));
      expect(cli.output()).not.toContain('"level":"debug"');

      // The file changes, and the certificate is rotated in place (another pair of the same CA).
      fs.writeFileSync(config, `log-level: debug\nhttp-token: ${t2}\nmax-in-flight: 5\n`);
      fs.copyFileSync(certs.files.clientCert, cert);
      fs.copyFileSync(certs.files.clientKey, key);
      const mark = cli.output().length;
      cli.child.kill('SIGHUP');
      await cli.waitFor(/"event":"configuration reloaded"/);
      expect(linesAfter(cli, mark).find((l) => l['event'] === 'configuration reloaded')).toMatchObject({
        level: 'info',
        signal: 'SIGHUP',
        reloaded: ['log-level', 'http-token', 'client-tls'],
        restartNeeded: ['max-in-flight'],
      });
      expect(cli.output()).not.toContain(t2);

      expect(await metricsStatus(http, t1)).toBe(401);
      expect(await metricsStatus(http, t2)).toBe(200);
      expect(await servedFingerprint(port)).toBe(fingerprint(certs.clientCert));
      await cli.waitFor(/"level":"debug"/);

      // A file that no longer validates changes nothing, and says why.
      fs.writeFileSync(config, `log-level: loud\nhttp-token: ${token()}\n`);
      const mark2 = cli.output().length;
      cli.child.kill('SIGHUP');
      await cli.waitFor(/"event":"reload refused: configuration invalid, nothing changed"/);
      expect(JSON.stringify(linesAfter(cli, mark2))).toContain('log-level=\\"loud\\"');
      expect(await metricsStatus(http, t2)).toBe(200);
      expect(cli.child.exitCode).toBeNull();
    } finally {
      expect(await cli.stop('SIGTERM')).toBe(0);
    }
  });

  test('SIGHUP with nothing to reload, SIGUSR1, SIGUSR2, SIGQUIT: each logged, the process serves on; no inspector', async () => {
    const t = token();
    const { cli, http } = await start(['--http-token', t]);
    try {
      for (const signal of ['SIGHUP', 'SIGUSR1', 'SIGUSR2', 'SIGQUIT'] as const) {
        const mark = cli.output().length;
        cli.child.kill(signal);
        await cli.waitFor(new RegExp(`"event":"signal ignored[^"]*".*"signal":"${signal}"`));
        const line = linesAfter(cli, mark).find((l) => l['signal'] === signal);
        expect(line, signal).toMatchObject({ level: 'warn' });
        const health = await fetch(`http://${http}/healthz`);
        expect(health.status, `after ${signal}`).toBe(200);
      }
      await new Promise((r) => setTimeout(r, 500));
      expect(cli.output()).not.toMatch(/Debugger listening|Starting inspector/);
      expect(cli.child.exitCode).toBeNull();
    } finally {
      expect(await cli.stop('SIGTERM')).toBe(0);
    }
  });

  test('control: a node process that does not listen for SIGUSR1 opens the inspector on it', async () => {
    const child = spawn(process.execPath, ['--inspect-port=0', '-e', 'setTimeout(() => {}, 20000)'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    try {
      await new Promise((r) => setTimeout(r, 500));
      child.kill('SIGUSR1');
      for (let i = 0; i < 100 && !err.includes('Debugger listening'); i++)
        await new Promise((r) => setTimeout(r, 50));
      expect(err).toContain('Debugger listening');
    } finally {
      child.kill('SIGKILL');
    }
  });

  test('a second SIGTERM ends the process while exiting waits for a hung thread-pool thread', async () => {
    // A FIFO nobody writes to: opening it blocks a libuv thread-pool thread for good, as a DNS
    // lookup against a dead resolver or a call into a hung file system does.
    const fifo = path.join(dir, 'never-written');
    execFileSync('mkfifo', [fifo]);
    const preload = path.join(dir, 'hang-thread-pool.cjs');
    fs.writeFileSync(preload, `require('fs').open(${JSON.stringify(fifo)}, 'r', () => {});\n`);
    const { cli } = await start([], { NODE_OPTIONS: `--require ${preload}` });
    cli.child.kill('SIGTERM');
    await cli.waitFor(/"event":"stopped"/);
    // process.exit(0) now waits for that thread: the process is still there.
    await new Promise((r) => setTimeout(r, 1500));
    expect(cli.child.exitCode, cli.output()).toBeNull();
    expect(cli.child.signalCode).toBeNull();

    cli.child.kill('SIGTERM');
    const ended = await Promise.race([
      cli.exited.then(() => 'ended'),
      new Promise((r) => setTimeout(() => r('still running'), 10_000)),
    ]);
    if (ended !== 'ended') cli.child.kill('SIGKILL');
    expect(ended).toBe('ended');
    expect(cli.child.signalCode).toBe('SIGTERM');
  });
});
