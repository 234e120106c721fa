// Relays the proxy is compared with, each in a process of its own so that its CPU time and memory
// can be read from /proc: a bare Node relay (bare-relay.mjs) and HAProxy in TCP mode (L4, the
// Debian package, with splice(2) where it can).
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

async function listening(child: ChildProcess, port: number, name: string): Promise<void> {
  let failed: Error | null = null;
  child.once('error', (err) => (failed = err));
  const deadline = Date.now() + 15_000;
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
