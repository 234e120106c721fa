/**
 * The checks of the configuration that need the file system, run once at start after
 * loadConfig: TLS files exist, are readable and hold what they should; the embedded store's data
 * directory is a writable directory on a real file system. Each failure is a ConfigError naming
 * the option (exit code 2), found before anything is opened.
 */
import { constants as fsConstants, mkdirSync, readFileSync, statfsSync, statSync } from 'node:fs';
import { open, unlink } from 'node:fs/promises';
import path from 'node:path';
import { redactUrl } from '../backends/redact-url.js';
import { ConfigError, fileProblem } from './config.js';
import type { ProxyConfig } from './config.js';
import { loadNativeRelay } from './core/native-relay.js';
import { refusedTlsPart } from './tls-pair.js';

/**
 * Kernel file systems (statfs f_type, linux/magic.h) where a directory of files cannot live: a
 * store there would fail in ways LMDB reports badly (on /proc, Node's recursive mkdir even spins).
 */
const PSEUDO_FILE_SYSTEMS = new Map<number, string>([
  [0x9fa0, 'proc'],
  [0x62656572, 'sysfs'],
  [0x1cd1, 'devpts'],
  [0x27e0eb, 'cgroup'],
  [0x63677270, 'cgroup2'],
  [0x64626720, 'debugfs'],
  [0x74726163, 'tracefs'],
  [0x73636673, 'securityfs'],
  [0x6165676c, 'pstore'],
  [0xcafe4a11, 'bpf'],
  [0x62656570, 'configfs'],
  [0x65735543, 'fusectl'],
  [0x19800202, 'mqueue'],
  [0xde5e81e4, 'efivarfs'],
  [0xf97cff8c, 'selinuxfs'],
  [0x42494e4d, 'binfmt_misc'],
  [0x958458f6, 'hugetlbfs'],
  [0x6e736673, 'nsfs'],
]);

/** File systems in memory: they work, but what they hold is gone after a reboot. */
const MEMORY_FILE_SYSTEMS = new Map<number, string>([
  [0x01021994, 'tmpfs'],
  [0x858458f6, 'ramfs'],
]);

/**
 * How long creating and syncing a file in the data directory may take before the start is refused.
 * It only has to tell a hung mount (a dead NFS server) from a disk: a healthy disk behind a busy
 * machine took over 1 s for this fsync at load average 45-84, and a proxy that refuses to start on
 * a slow disk is a worse answer than one that starts a little late.
 */
export const DATA_DIR_CHECK_MS = 10_000;

/** Everything `checkStartup` found worth telling that is not an error. */
export interface StartupNotes {
  warnings: { event: string; fields: Record<string, unknown> }[];
}

export async function checkStartup(config: ProxyConfig): Promise<StartupNotes> {
  const notes: StartupNotes = { warnings: [] };
  checkTlsFiles(config);
  checkNativeRelay(config);
  if (config.storeTarget.kind === 'embedded') {
    const memory = await checkDataDir(
      config.storeTarget.dir,
      config.given.has('store') ? 'store' : 'data-dir',
    );
    if (memory !== undefined) {
      notes.warnings.push({
        event: 'data directory is in memory: offsets are lost at reboot',
        fields: { dir: path.resolve(config.storeTarget.dir), fileSystem: memory },
      });
    }
  }
  await checkRedisKind(config);
  return notes;
}

/**
 * A Redis URL whose scheme does not match the server (redis+cluster:// at a standalone server, a
 * sentinel URL at a plain one, ...): refused with the server's own answer. Servers that do not
 * answer pass: the proxy may start before its store.
 */
async function checkRedisKind(config: ProxyConfig): Promise<void> {
  const target = config.storeTarget;
  if (target.kind !== 'redis') return;
  const { redisKindProblem } = await import('../backends/redis-kind.js');
  const problem = await redisKindProblem(target.redis, Math.min(config.storeTimeoutMs, 5000));
  if (problem !== null) throw new ConfigError('store', redactUrl(target.url), problem);
}

/** --native-relay on: the addon must load, and the connections must be plain TCP for it to be used. */
function checkNativeRelay(config: ProxyConfig): void {
  if (config.nativeRelay !== 'on') return;
  const { binding, why } = loadNativeRelay();
  if (binding === null) throw new ConfigError('native-relay', 'on', `the native relay addon is ${why}`);
  if (config.clientTls || config.brokerTls) {
    throw new ConfigError(
      'native-relay',
      'on',
      'TLS connections are relayed in JavaScript: use auto or off with TLS',
    );
  }
}

function readable(option: string, file: string): Buffer {
  let stat;
  try {
    stat = statSync(file);
  } catch (err) {
    throw new ConfigError(option, file, `cannot read: ${fileProblem(err)}; expected a readable file`);
  }
  if (!stat.isFile()) throw new ConfigError(option, file, 'not a regular file; expected a readable file');
  try {
    return readFileSync(file);
  } catch (err) {
    throw new ConfigError(option, file, `cannot read: ${fileProblem(err)}; expected a readable file`);
  }
}

/** TLS files: readable, PEM, and a certificate that matches its key (what createSecureContext checks). */
export function checkTlsFiles(config: Pick<ProxyConfig, 'clientTls' | 'brokerTls'>): void {
  const pem = (
    option: string,
    file: string | undefined,
    what: RegExp,
    expected: string,
  ): Buffer | undefined => {
    if (file === undefined) return undefined;
    const data = readable(option, file);
    if (!what.test(data.toString('latin1')))
      throw new ConfigError(option, file, `no ${expected} in it; expected a PEM file with ${expected}`);
    return data;
  };
  const CERT = /-----BEGIN CERTIFICATE-----/;
  const KEY = /-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----/;
  const pair = (
    certOption: string,
    keyOption: string,
    cert?: string,
    key?: string,
    ca?: [string, string?],
  ) => {
    const certPem = pem(certOption, cert, CERT, 'a certificate');
    const keyPem = pem(keyOption, key, KEY, 'a private key');
    if (ca) pem(ca[0], ca[1], CERT, 'a CA certificate');
    const refused = refusedTlsPart(certPem, keyPem);
    if (refused === null) return;
    const why = refused.error.message;
    if (refused.part === 'cert')
      throw new ConfigError(certOption, cert, `not usable with ${keyOption}: ${why}`);
    // A key that is not the certificate's is the key's fault, as is a key that does not load.
    throw new ConfigError(keyOption, key, `not usable with ${certOption}: ${why}`);
  };
  if (config.clientTls) {
    const t = config.clientTls;
    pair('client-tls-cert', 'client-tls-key', t.cert, t.key, ['client-tls-ca', t.ca]);
  }
  if (config.brokerTls) {
    const t = config.brokerTls;
    pair('broker-tls-cert', 'broker-tls-key', t.cert, t.key, ['broker-tls-ca', t.ca]);
  }
}

/**
 * Makes sure `dir` is a directory the embedded store can live in: on a real file system (refused
 * at once on /proc and other kernel file systems), created if missing (one level at a time: Node's
 * recursive mkdir can spin on such paths), and writable: a file is created, written, fsynced and
 * removed within DATA_DIR_CHECK_MS. Returns the memory file system's name when it is one (tmpfs).
 */
export async function checkDataDir(dir: string, option = 'data-dir'): Promise<string | undefined> {
  const fail = (why: string): never => {
    throw new ConfigError(option, dir, `${why}; expected a writable directory on a real file system`);
  };
  const absolute = path.resolve(dir);
  // The nearest part of the path that exists tells the file system the directory would be on.
  let existing = absolute;
  const missing: string[] = [];
  for (;;) {
    try {
      statSync(existing);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
        fail(`cannot look at ${existing}: ${fileProblem(err)}`);
      missing.unshift(existing);
      const parent = path.dirname(existing);
      if (parent === existing) fail('no part of the path exists');
      existing = parent;
    }
  }
  const fsType = (p: string): number => {
    try {
      return statfsSync(p).type;
    } catch (err) {
      return fail(`cannot look at ${p}: ${fileProblem(err)}`);
    }
  };
  const pseudo = PSEUDO_FILE_SYSTEMS.get(fsType(existing));
  if (pseudo !== undefined) fail(`${existing} is on ${pseudo}, a kernel file system`);
  if (!statSync(existing).isDirectory()) fail(`${existing} is not a directory`);
  for (const level of missing) {
    try {
      mkdirSync(level);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST')
        fail(`cannot create ${level}: ${fileProblem(err)}`);
    }
  }
  if (!statSync(absolute).isDirectory()) fail('not a directory');
  const type = fsType(absolute);
  if (PSEUDO_FILE_SYSTEMS.has(type)) fail(`on ${PSEUDO_FILE_SYSTEMS.get(type)}, a kernel file system`);
  await writeProbe(absolute, fail);
  return MEMORY_FILE_SYSTEMS.get(type);
}

/** Creates, writes, fsyncs and removes a file, within DATA_DIR_CHECK_MS (a hung mount must not hang the start). */
async function writeProbe(dir: string, fail: (why: string) => never): Promise<void> {
  const file = path.join(dir, `.kop-write-check-${process.pid}`);
  let step = 'create a file in it';
  const probe = (async () => {
    const handle = await open(file, fsConstants.O_CREAT | fsConstants.O_WRONLY | fsConstants.O_TRUNC, 0o600);
    try {
      step = 'write to a file in it';
      await handle.write(Buffer.from('kafka-offset-proxy write check\n'));
      step = 'sync a file in it (fsync)';
      await handle.sync();
    } finally {
      await handle.close();
    }
    step = 'remove a file from it';
    await unlink(file);
  })();
  // Abandoned on a timeout: its late failure must not be an unhandled rejection.
  probe.catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), DATA_DIR_CHECK_MS);
  });
  try {
    const outcome = await Promise.race([probe.then(() => 'done' as const), timeout]);
    if (outcome === 'timeout') fail(`could not ${step} within ${DATA_DIR_CHECK_MS} ms`);
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    fail(`cannot ${step}: ${fileProblem(err)}`);
  } finally {
    clearTimeout(timer);
  }
}
