// Process machinery shared by every component of the test bed (Kafka, Redis, ZooKeeper).
//
// No process may outlive the run that started it, however that run ends. Three layers:
//  1. every component is started through `setpriv --pdeathsig SIGKILL`, so the kernel kills it the
//     moment the Node process (precisely: the thread) that spawned it dies, even by SIGKILL;
//  2. a registry of live children is SIGKILLed on `exit`, SIGINT, SIGTERM and SIGHUP;
//  3. each child has a pid file under BED_ROOT/pids naming its owner; the first spawn of a later run
//     kills children whose owner is gone (for machines without setpriv, or a pdeathsig that missed).
// Pid reuse is ruled out by comparing the kernel start time recorded at spawn with /proc.

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const BED_ROOT = process.env['KOP_BED_DIR'] ?? path.join(os.tmpdir(), 'kafka-offset-proxy-bed');
const PID_DIR = path.join(BED_ROOT, 'pids');
const RUNS_DIR = path.join(BED_ROOT, 'runs');
const SETPRIV = '/usr/bin/setpriv';

/** Kernel start time of a process (field 22 of /proc/PID/stat), or undefined if it does not exist. */
export function processStartTime(pid: number): string | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) is in parentheses and may contain spaces: split after its end.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[19];
  } catch {
    return undefined;
  }
}

/** True if the process exists and is not a zombie waiting to be reaped. */
export function isAlive(pid: number, startTime?: string): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields[0] === 'Z' || fields[0] === 'X') return false;
    return startTime === undefined || fields[19] === startTime;
  } catch {
    return false;
  }
}

const ownStartTime = processStartTime(process.pid) ?? '0';

interface PidFile {
  pid: number;
  startTime: string;
  owner: number;
  ownerStartTime: string;
  name: string;
}

let leftoversReaped = false;

/**
 * Kills the components of earlier runs whose owning Node process is gone, and removes their temp
 * directories. Components of runs still alive (another engineer's tests) are left alone.
 * Returns the pids it killed.
 */
export function reapLeftovers(): number[] {
  const killed: number[] = [];
  fs.mkdirSync(PID_DIR, { recursive: true });
  fs.mkdirSync(RUNS_DIR, { recursive: true });
  for (const entry of fs.readdirSync(PID_DIR)) {
    const file = path.join(PID_DIR, entry);
    let info: PidFile;
    try {
      info = JSON.parse(fs.readFileSync(file, 'utf8')) as PidFile;
    } catch {
      continue; // being written by a live run, or garbage: leave it
    }
    if (isAlive(info.owner, info.ownerStartTime)) continue;
    if (isAlive(info.pid, info.startTime)) {
      try {
        process.kill(info.pid, 'SIGKILL');
        killed.push(info.pid);
      } catch {
        // already gone
      }
    }
    fs.rmSync(file, { force: true });
  }
  for (const entry of fs.readdirSync(RUNS_DIR)) {
    const [owner, ownerStart] = entry.split('-');
    if (owner === undefined || ownerStart === undefined) continue;
    if (!isAlive(Number(owner), ownerStart)) {
      fs.rmSync(path.join(RUNS_DIR, entry), { recursive: true, force: true });
    }
  }
  return killed;
}

function reapOnce(): void {
  if (leftoversReaped) return;
  leftoversReaped = true;
  reapLeftovers();
}

// ---- registry and exit hooks -------------------------------------------------------------------

const live = new Map<number, { pidFile: string }>();
const ownedDirs = new Set<string>();
let hooksInstalled = false;

/** Pids of the components this process started and that are still running. */
export function livePids(): number[] {
  return [...live.keys()];
}

function killAllSync(): void {
  for (const [pid, { pidFile }] of live) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
    fs.rmSync(pidFile, { force: true });
  }
  live.clear();
  if (process.env['KOP_BED_KEEP'] !== '1') {
    for (const dir of ownedDirs) fs.rmSync(dir, { recursive: true, force: true });
    ownedDirs.clear();
  }
}

function onSignal(signal: NodeJS.Signals): void {
  killAllSync();
  // If nobody else handles the signal, behave as if we had not been here: die of it.
  if (process.listenerCount(signal) === 1) {
    process.removeListener(signal, onSignal);
    process.kill(process.pid, signal);
  }
}

function installHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  process.on('exit', killAllSync);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, onSignal);
}

// ---- temp directories --------------------------------------------------------------------------

/** A fresh directory under BED_ROOT/runs, removed when this process exits (unless KOP_BED_KEEP=1). */
export function makeRunDir(prefix: string): string {
  reapOnce();
  installHooks();
  fs.mkdirSync(RUNS_DIR, { recursive: true });
  const dir = path.join(
    RUNS_DIR,
    `${process.pid}-${ownStartTime}-${prefix}-${randomBytes(4).toString('hex')}`,
  );
  fs.mkdirSync(dir, { recursive: true });
  ownedDirs.add(dir);
  return dir;
}

export function removeRunDir(dir: string): void {
  if (process.env['KOP_BED_KEEP'] === '1') return;
  fs.rmSync(dir, { recursive: true, force: true });
  ownedDirs.delete(dir);
}

// ---- logs --------------------------------------------------------------------------------------

/** The last `lines` lines of a file ('' if it does not exist); reads at most the last 256 KiB. */
export function tailFile(file: string, lines = 40): string {
  let fd: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch {
    return '';
  }
  try {
    const size = fs.fstatSync(fd).size;
    const length = Math.min(size, 256 * 1024);
    const buffer = Buffer.alloc(length);
    fs.readSync(fd, buffer, 0, length, size - length);
    const all = buffer.toString('utf8').split('\n');
    if (all[all.length - 1] === '') all.pop();
    return all.slice(-lines).join('\n');
  } finally {
    fs.closeSync(fd);
  }
}

// ---- managed processes -------------------------------------------------------------------------

export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ManagedProcess {
  readonly name: string;
  readonly pid: number;
  readonly logFile: string;
  /** Set once the process has exited. */
  readonly exitStatus: ExitStatus | undefined;
  readonly exited: Promise<ExitStatus>;
  /** Sends `signal` (SIGTERM by default), waits up to `timeoutMs`, then SIGKILLs. Resolves once it is gone. */
  stop(opts?: { signal?: NodeJS.Signals; timeoutMs?: number }): Promise<void>;
  /** SIGKILL, resolves once it is gone. */
  kill(): Promise<void>;
}

export interface SpawnOptions {
  name: string;
  command: string;
  args: string[];
  /** stdout and stderr are appended to this file. */
  logFile: string;
  cwd?: string;
  env?: NodeJS.ProcessEnv;
}

function usePdeathsig(): boolean {
  return process.env['KOP_BED_NO_PDEATHSIG'] !== '1' && fs.existsSync(SETPRIV);
}

export function spawnManaged(opts: SpawnOptions): ManagedProcess {
  reapOnce();
  installHooks();
  fs.mkdirSync(path.dirname(opts.logFile), { recursive: true });
  const logFd = fs.openSync(opts.logFile, 'a');
  const [command, args] = usePdeathsig()
    ? [SETPRIV, ['--pdeathsig', 'SIGKILL', '--', opts.command, ...opts.args]]
    : [opts.command, opts.args];
  let child;
  try {
    child = spawn(command, args, {
      cwd: opts.cwd,
      env: opts.env ?? process.env,
      stdio: ['ignore', logFd, logFd],
    });
  } finally {
    fs.closeSync(logFd);
  }
  const pid = child.pid;
  if (pid === undefined) {
    child.once('error', () => {}); // reported by the throw below
    throw new Error(`could not start ${opts.name} (${opts.command}): see ${opts.logFile}`);
  }
  // setpriv execs the real command, so `pid` is the component itself.
  const pidFile = path.join(PID_DIR, `${pid}.json`);
  const info: PidFile = {
    pid,
    startTime: processStartTime(pid) ?? '0',
    owner: process.pid,
    ownerStartTime: ownStartTime,
    name: opts.name,
  };
  fs.mkdirSync(PID_DIR, { recursive: true });
  fs.writeFileSync(pidFile, JSON.stringify(info));
  live.set(pid, { pidFile });

  let exitStatus: ExitStatus | undefined;
  const exited = new Promise<ExitStatus>((resolve) => {
    child.once('exit', (code, signal) => {
      exitStatus = { code, signal };
      live.delete(pid);
      fs.rmSync(pidFile, { force: true });
      resolve(exitStatus);
    });
    child.once('error', () => {
      // spawn failure (e.g. command not found): reported through 'exit' with code -2 as well
      exitStatus ??= { code: -1, signal: null };
      live.delete(pid);
      fs.rmSync(pidFile, { force: true });
      resolve(exitStatus);
    });
  });
  // A component must never keep a test process alive; the exit hook kills it instead.
  child.unref();

  // While someone waits for the exit, the child must keep Node alive, or a script awaiting stop()
  // would end with an unsettled promise.
  const awaitExit = async (): Promise<ExitStatus> => {
    child.ref();
    try {
      return await exited;
    } finally {
      child.unref();
    }
  };

  const waitGone = async (timeoutMs: number): Promise<boolean> => {
    if (exitStatus) return true;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    const gone = await Promise.race([awaitExit().then(() => true as const), timeout]);
    clearTimeout(timer);
    return gone;
  };

  const managed: ManagedProcess = {
    name: opts.name,
    pid,
    logFile: opts.logFile,
    get exitStatus() {
      return exitStatus;
    },
    exited,
    async stop({ signal = 'SIGTERM', timeoutMs = 20_000 } = {}) {
      if (exitStatus) return;
      try {
        process.kill(pid, signal);
      } catch {
        // already gone
      }
      if (await waitGone(timeoutMs)) return;
      await managed.kill();
    },
    async kill() {
      if (exitStatus) return;
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
      await awaitExit();
    },
  };
  return managed;
}

/** Runs a command to completion (a format tool, redis-cli); throws with the log tail on failure. */
export async function runToCompletion(opts: SpawnOptions & { timeoutMs?: number }): Promise<void> {
  const proc = spawnManaged(opts);
  const timeoutMs = opts.timeoutMs ?? 60_000;
  let timer: NodeJS.Timeout | undefined;
  const status = await Promise.race([
    proc.exited,
    new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), timeoutMs);
    }),
  ]);
  clearTimeout(timer);
  if (status === undefined) {
    await proc.kill();
    throw new Error(
      `${opts.name} did not finish within ${timeoutMs} ms. Last lines of ${opts.logFile}:\n${tailFile(opts.logFile)}`,
    );
  }
  if (status.code !== 0) {
    throw new Error(
      `${opts.name} failed (exit code ${status.code}, signal ${status.signal}). Last lines of ${opts.logFile}:\n${tailFile(opts.logFile)}`,
    );
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Polls `check` until it returns true. Fails early, with the tail of its log, if `proc` exits, and
 * with the same tail when `timeoutMs` passes. Exceptions from `check` count as "not yet".
 */
export async function waitUntil(
  what: string,
  check: () => Promise<boolean>,
  opts: { timeoutMs: number; intervalMs?: number; proc?: ManagedProcess },
): Promise<void> {
  const deadline = Date.now() + opts.timeoutMs;
  const interval = opts.intervalMs ?? 200;
  let lastError: unknown;
  for (;;) {
    if (opts.proc?.exitStatus) {
      const { code, signal } = opts.proc.exitStatus;
      throw new Error(
        `${opts.proc.name} exited (code ${code}, signal ${signal}) before ${what}. Last lines of ${opts.proc.logFile}:\n${tailFile(opts.proc.logFile)}`,
      );
    }
    try {
      if (await check()) return;
      lastError = undefined;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() >= deadline) {
      const detail = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
      const log = opts.proc ? ` Last lines of ${opts.proc.logFile}:\n${tailFile(opts.proc.logFile)}` : '';
      throw new Error(`timed out after ${opts.timeoutMs} ms waiting for ${what}${detail}.${log}`);
    }
    await sleep(interval);
  }
}
