/**
 * One writer per embedded data directory: the process that writes it (a proxy, or a writing
 * `offsets` command) holds the directory by listening on a Unix socket in it, `holder.sock`.
 *
 * LMDB itself serialises writers across processes, but two proxies on one directory would each
 * sweep, migrate and lease it as if alone, and an operator's `offsets set` would race the running
 * proxy's consumers; the docs have always said one proxy per directory. A lock file with a pid
 * cannot tell a dead holder from a live one reliably (pid 1 in every container, pid namespaces,
 * another pod on the same volume); a listening socket can: the kernel stops accepting on it the
 * moment its process ends, however it ends (SIGKILL included), and it answers with who holds it,
 * so the refusal names the holder. A socket file left by a dead holder refuses connections and is
 * taken over; the take-over itself is guarded by an O_EXCL file so two starters cannot both take
 * over the same stale socket.
 *
 * Unix socket paths are at most 107 bytes: a longer directory is held by its path relative to the
 * working directory, else by an abstract socket named after the directory's device and inode
 * (seen within one network namespace only; docs/stores.md says so).
 */
import { closeSync, openSync, rmSync, statSync, unlinkSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export const HOLDER_SOCKET = 'holder.sock';
const TAKEOVER_GUARD = 'holder.sock.takeover';
/** A take-over guard older than this was left by a starter that died in the middle of it. */
const GUARD_STALE_MS = 10_000;
const ASK_TIMEOUT_MS = 2_000;
const MAX_SUN_PATH = 107;

/** Who holds a data directory, as its holder answers. */
export interface DataDirHolderInfo {
  pid: number;
  host: string;
  /** What holds it: "proxy", "offsets set", ... */
  role: string;
  since: string;
}

export class DataDirHeldError extends Error {
  constructor(
    readonly dir: string,
    readonly holder: DataDirHolderInfo | null,
    why?: string,
  ) {
    const who = holder
      ? `${holder.role} (pid ${holder.pid} on ${holder.host}, since ${holder.since})`
      : `another process (${why ?? 'it did not say who it is'})`;
    super(`data directory ${dir} is held by ${who}: one process writes an embedded store at a time`);
    this.name = 'DataDirHeldError';
  }
}

export interface DataDirHold {
  /** Where the hold is: the socket path, or `@name` for an abstract socket. */
  readonly address: string;
  release(): Promise<void>;
}

/** The address to listen on for `dir` (absolute directory). */
function holderAddress(dir: string): { address: string; file: boolean } {
  const absolute = path.join(dir, HOLDER_SOCKET);
  if (Buffer.byteLength(absolute) <= MAX_SUN_PATH) return { address: absolute, file: true };
  const relative = path.relative(process.cwd(), absolute);
  if (Buffer.byteLength(relative) <= MAX_SUN_PATH) return { address: relative, file: true };
  const st = statSync(dir);
  return { address: `\0kafka-offset-proxy-data-dir:${st.dev}:${st.ino}`, file: false };
}

function listen(address: string, me: DataDirHolderInfo): Promise<net.Server> {
  return new Promise((resolve, reject) => {
    const server = net.createServer((socket) => {
      socket.on('error', () => undefined);
      socket.end(JSON.stringify(me) + '\n');
    });
    server.once('error', reject);
    server.listen(address, () => {
      server.off('error', reject);
      // The hold must not keep a process alive that has nothing else to do.
      server.unref();
      resolve(server);
    });
  });
}

type Answer = { live: true; holder: DataDirHolderInfo | null; why?: string } | { live: false };

/** Asks the socket at `address` who holds it; `live: false` when nothing listens there any more. */
function ask(address: string): Promise<Answer> {
  return new Promise((resolve) => {
    const socket = net.connect(address);
    let text = '';
    let connected = false;
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ live: true, holder: null, why: 'it did not answer' });
    }, ASK_TIMEOUT_MS);
    const done = (answer: Answer) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    socket.on('connect', () => (connected = true));
    socket.on('data', (d: Buffer) => (text += d.toString('utf8')));
    socket.on('end', () => {
      try {
        done({ live: true, holder: JSON.parse(text) as DataDirHolderInfo });
      } catch {
        done({ live: true, holder: null });
      }
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (!connected && (err.code === 'ECONNREFUSED' || err.code === 'ENOENT')) done({ live: false });
      else done({ live: true, holder: null, why: `asking it failed: ${err.code ?? err.message}` });
    });
  });
}

/** Runs `fn` holding the O_EXCL take-over guard of `dir`; undefined when another process holds it. */
function withTakeoverGuard<T>(dir: string, fn: () => Promise<T>): Promise<T> | undefined {
  const guard = path.join(dir, TAKEOVER_GUARD);
  let fd: number;
  try {
    fd = openSync(guard, 'wx', 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    try {
      if (Date.now() - statSync(guard).mtimeMs > GUARD_STALE_MS) rmSync(guard, { force: true });
    } catch {
      // removed meanwhile: the next attempt sees
    }
    return undefined;
  }
  closeSync(fd);
  return fn().finally(() => rmSync(guard, { force: true }));
}

/**
 * Holds `dir` (an existing directory) for `role` until `release()` or the end of the process.
 * Throws DataDirHeldError naming the holder when another live process holds it.
 */
export async function holdDataDir(dir: string, role: string): Promise<DataDirHold> {
  const absolute = path.resolve(dir);
  const me: DataDirHolderInfo = {
    pid: process.pid,
    host: os.hostname(),
    role,
    since: new Date().toISOString(),
  };
  const { address, file } = holderAddress(absolute);
  for (let attempt = 0; attempt < 50; attempt++) {
    try {
      const server = await listen(address, me);
      return {
        address: file ? path.resolve(address) : `@${address.slice(1)}`,
        // Closing a listening Unix socket removes its file.
        release: () => new Promise<void>((resolve) => server.close(() => resolve())),
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') {
        throw new Error(
          `data directory ${absolute}: cannot create ${HOLDER_SOCKET} in it: ${(err as Error).message}`,
          { cause: err },
        );
      }
    }
    const answer = await ask(address);
    if (answer.live) throw new DataDirHeldError(absolute, answer.holder, answer.why);
    if (!file) continue; // an abstract socket vanishes with its process: listen again
    // A socket file its holder left behind (killed): take it over, one starter at a time.
    const tookOver = withTakeoverGuard(absolute, async () => {
      if ((await ask(address)).live) return;
      try {
        unlinkSync(address);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
      }
    });
    if (tookOver) await tookOver;
    else await new Promise((r) => setTimeout(r, 100));
  }
  throw new DataDirHeldError(absolute, null, 'its holder socket could not be taken over');
}
