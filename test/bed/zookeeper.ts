// A real ZooKeeper server (standalone) from Debian's zookeeper package.

import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { freePort } from './ports.js';
import { makeRunDir, spawnManaged, waitUntil } from './process.js';
import type { ManagedProcess } from './process.js';

const HOST = '127.0.0.1';
const JAVA_DIR = process.env['KOP_ZOOKEEPER_JARS'] ?? '/usr/share/java';

export interface ZooKeeperServer {
  /** 127.0.0.1:port */
  connectString: string;
  /** zk://127.0.0.1:port */
  url: string;
  stop(): Promise<void>;
  /** Starts again on the same port and data directory. */
  start(): Promise<void>;
  /** Pid of the running server (undefined while stopped), for tests that check cleanup. */
  readonly pid: number | undefined;
}

function classpath(): string {
  const jar = path.join(JAVA_DIR, 'zookeeper.jar');
  if (!fs.existsSync(jar)) {
    throw new Error(`${jar} not found: install Debian's zookeeper package (apt-get install zookeeper)`);
  }
  // zookeeper.jar's manifest lists its dependencies. slf4j-simple (from libslf4j-java, a dependency
  // of the package) makes the server log to stderr, i.e. to our log file, instead of nowhere.
  const binding = path.join(JAVA_DIR, 'slf4j-simple.jar');
  return [jar, ...(fs.existsSync(binding) ? [binding] : [])].join(':');
}

/** Sends a four-letter-word command and returns the whole answer. */
function fourLetterWord(port: number, word: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: HOST, port });
    let data = '';
    socket.setTimeout(2000, () => {
      socket.destroy();
      reject(new Error(`no answer to ${word}`));
    });
    socket.once('connect', () => socket.write(word));
    socket.on('data', (chunk) => (data += chunk.toString('utf8')));
    socket.once('end', () => resolve(data));
    socket.once('error', reject);
  });
}

export async function startZooKeeper(): Promise<ZooKeeperServer> {
  const dir = makeRunDir('zookeeper');
  const port = await freePort();
  const dataDir = path.join(dir, 'data');
  fs.mkdirSync(dataDir, { recursive: true });
  const config = path.join(dir, 'zoo.cfg');
  fs.writeFileSync(
    config,
    [
      'tickTime=500',
      'initLimit=10',
      'syncLimit=5',
      `dataDir=${dataDir}`,
      `clientPort=${port}`,
      `clientPortAddress=${HOST}`,
      'maxClientCnxns=0',
      'admin.enableServer=false',
      '4lw.commands.whitelist=ruok,srvr,stat',
      // Session timeouts between 1 s and 20 s (2 and 40 ticks), so tests can expire sessions fast.
      'minSessionTimeout=1000',
      'maxSessionTimeout=20000',
      '',
    ].join('\n'),
  );
  const logFile = path.join(dir, 'zookeeper.log');
  let proc: ManagedProcess | undefined;

  const start = async () => {
    if (proc && !proc.exitStatus) return;
    proc = spawnManaged({
      name: `ZooKeeper :${port}`,
      command: 'java',
      args: [
        '-Xmx128m',
        '-XX:+UseSerialGC',
        '-XX:TieredStopAtLevel=1',
        '-XX:-UsePerfData',
        '-Dzookeeper.jmx.log4j.disable=true',
        '-cp',
        classpath(),
        'org.apache.zookeeper.server.ZooKeeperServerMain',
        config,
      ],
      logFile,
      cwd: dir,
    });
    // `srvr` answers with the mode only once the server really serves (ruok answers earlier).
    await waitUntil(
      `ZooKeeper on port ${port} to serve`,
      async () => (await fourLetterWord(port, 'srvr')).includes('Mode: standalone'),
      {
        timeoutMs: 60_000,
        intervalMs: 100,
        proc,
      },
    );
  };
  await start();

  return {
    connectString: `${HOST}:${port}`,
    url: `zk://${HOST}:${port}`,
    get pid() {
      return proc && !proc.exitStatus ? proc.pid : undefined;
    },
    async stop() {
      await proc?.stop({ timeoutMs: 10_000 });
    },
    start,
  };
}
