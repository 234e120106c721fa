// Relays the proxy is compared with, each in a process of its own so that its CPU time and memory
// can be read from /proc: a bare Node relay (bare-relay.mjs), HAProxy in TCP mode (L4, the
// Debian package, with splice(2) where it can), and any other relay given as a command line.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export interface RelayProcess {
  pid: number;
  /** "127.0.0.1:port": where clients connect. */
  address: string;
  stop(): Promise<void>;
}

const BARE_RELAY = path.join(path.dirname(fileURLToPath(import.meta.url)), 'bare-relay.mjs');

function splitHostPort(hostPort: string): [string, number] {
  const at = hostPort.lastIndexOf(':');
  return [hostPort.slice(0, at), Number(hostPort.slice(at + 1))];
}

function stopper(child: ChildProcess): () => Promise<void> {
  return () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    });
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

async function listening(child: ChildProcess, port: number, name: string, timeoutMs = 15_000): Promise<void> {
  let failed: Error | null = null;
  child.once('error', (err) => (failed = err));
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (failed) throw new Error(`${name} did not start: ${(failed as Error).message}`);
    if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode}`);
    if (await accepts(port)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${name} is not listening on ${port}`);
}

/** bare-relay.mjs on `port`, to `upstream` ("host:port"). */
export async function startBareRelay(port: number, upstream: string): Promise<RelayProcess> {
  const [host, upstreamPort] = splitHostPort(upstream);
  const child = spawn(process.execPath, [BARE_RELAY, String(port), host, String(upstreamPort)], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  await listening(child, port, 'bare relay');
  return { pid: child.pid!, address: `127.0.0.1:${port}`, stop: stopper(child) };
}

/** `haproxy` (on the PATH) in TCP mode on `port`, to `upstream`, in the foreground. */
export async function startHaproxy(port: number, upstream: string): Promise<RelayProcess> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kop-haproxy-'));
  const config = path.join(dir, 'haproxy.cfg');
  fs.writeFileSync(
    config,
    [
      'global',
      '  maxconn 4096',
      'defaults',
      '  mode tcp',
      // Kernel-side copies between the two sockets where the kernel allows it (L4 at its cheapest).
      '  option splice-auto',
      '  timeout connect 5s',
      '  timeout client 1h',
      '  timeout server 1h',
      'listen kafka',
      `  bind 127.0.0.1:${port}`,
      `  server broker ${upstream}`,
      '',
    ].join('\n'),
  );
  const child = spawn('haproxy', ['-db', '-f', config], { stdio: ['ignore', 'ignore', 'inherit'] });
  child.once('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  await listening(child, port, 'haproxy');
  return { pid: child.pid!, address: `127.0.0.1:${port}`, stop: stopper(child) };
}

/** What an external relay's command template may name: `{listenPort}`, `{brokerHost}`, ... */
export type Placeholders = Record<string, string | number>;

/**
 * The template with every `{name}` of `values` replaced, and every `{file:<path>}` replaced by the
 * path of a copy of that file, written into `dir` with its own placeholders replaced (for relays
 * that take a configuration file). An unknown `{word}` is an error, not left in place (a typo would
 * otherwise reach the relay); braces around anything else (`{}`, `{a: b}`) are left alone.
 */
export function expandTemplate(template: string, values: Placeholders, dir: string): string {
  let files = 0;
  return template.replace(/\{(?:file:([^}\s]+)|([A-Za-z]+))\}/g, (whole, file?: string, name?: string) => {
    if (file !== undefined) {
      const target = path.join(dir, `${++files}-${path.basename(file)}`);
      fs.writeFileSync(target, expandTemplate(fs.readFileSync(file, 'utf8'), values, dir));
      return target;
    }
    const value = values[name!];
    if (value === undefined) throw new Error(`unknown placeholder ${whole}`);
    return String(value);
  });
}

/**
 * Any relay as a shell command line (its placeholders expanded by expandTemplate) that listens on
 * `port`. The shell `exec`s the command, so the pid measured is the relay's own (a wrapper script
 * must `exec` too, as Kroxylicious's and most JVM launchers do); it runs in a process group of its
 * own, stopped as a whole. Its output goes to a file in its directory, kept when it fails to start.
 */
export async function startExternalRelay(
  name: string,
  template: string,
  port: number,
  values: Placeholders,
): Promise<RelayProcess & { command: string }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `kop-relay-${name}-`));
  const command = expandTemplate(template, values, dir);
  const output = fs.openSync(path.join(dir, 'output.log'), 'w');
  const child = spawn('/bin/sh', ['-c', `exec ${command}`], {
    stdio: ['ignore', output, output],
    detached: true,
  });
  fs.closeSync(output);
  try {
    // A JVM on a loaded machine takes a while.
    await listening(child, port, name, 120_000);
  } catch (err) {
    if (child.exitCode === null) process.kill(-child.pid!, 'SIGKILL');
    throw new Error(`${(err as Error).message} (command: ${command}; output in ${dir}/output.log)`);
  }
  const stop = (): Promise<void> =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => {
        fs.rmSync(dir, { recursive: true, force: true });
        resolve();
      });
      process.kill(-child.pid!, 'SIGTERM');
    });
  return { pid: child.pid!, address: `127.0.0.1:${port}`, command, stop };
}
