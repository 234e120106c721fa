// Real ZooKeeper servers from Debian's zookeeper package: a standalone server, or a 3-node ensemble.

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

/** The settings every server of the bed gets (standalone and ensemble alike). */
function baseConfig(dataDir: string, port: number, syncLimit = 5): string[] {
  return [
    'tickTime=500',
    'initLimit=10',
    `syncLimit=${syncLimit}`,
    `dataDir=${dataDir}`,
    `clientPort=${port}`,
    `clientPortAddress=${HOST}`,
    'maxClientCnxns=0',
    'admin.enableServer=false',
    '4lw.commands.whitelist=ruok,srvr,stat',
    // Session timeouts between 1 s and 20 s (2 and 40 ticks), so tests can expire sessions fast.
    'minSessionTimeout=1000',
    'maxSessionTimeout=20000',
  ];
}

/**
 * One server process: started (again) on its port and data directory, and ready once `srvr`
 * reports one of `modes` (ruok answers earlier than the server really serves).
 */
function serverProcess(dir: string, port: number, mainClass: string, modes: RegExp) {
  const config = path.join(dir, 'zoo.cfg');
  const logFile = path.join(dir, 'zookeeper.log');
  let proc: ManagedProcess | undefined;
  const spawn = () => {
    if (proc && !proc.exitStatus) return proc;
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
        mainClass,
        config,
      ],
      logFile,
      cwd: dir,
    });
    return proc;
  };
  const serving = (running: ManagedProcess, timeoutMs = 60_000) =>
    waitUntil(
      `ZooKeeper on port ${port} to serve`,
      async () => modes.test(await fourLetterWord(port, 'srvr')),
      { timeoutMs, intervalMs: 100, proc: running },
    );
  return {
    config,
    logFile,
    spawn,
    serving,
    get pid() {
      return proc && !proc.exitStatus ? proc.pid : undefined;
    },
    stop: async () => proc?.stop({ timeoutMs: 10_000 }),
    kill: async () => proc?.kill(),
  };
}

export async function startZooKeeper(): Promise<ZooKeeperServer> {
  const dir = makeRunDir('zookeeper');
  const port = await freePort();
  const dataDir = path.join(dir, 'data');
  fs.mkdirSync(dataDir, { recursive: true });
  const server = serverProcess(
    dir,
    port,
    'org.apache.zookeeper.server.ZooKeeperServerMain',
    /Mode: standalone/,
  );
  fs.writeFileSync(server.config, [...baseConfig(dataDir, port), ''].join('\n'));
  const start = async () => {
    await server.serving(server.spawn());
  };
  await start();

  return {
    connectString: `${HOST}:${port}`,
    url: `zk://${HOST}:${port}`,
    get pid() {
      return server.pid;
    },
    stop: server.stop,
    start,
  };
}

export interface EnsembleMember {
  /** 1, 2 or 3 (the server's myid). */
  readonly id: number;
  readonly port: number;
  /** Pid of the running server (undefined while stopped). */
  readonly pid: number | undefined;
  /** "leader", "follower", or undefined when it does not serve (stopped, frozen, electing). */
  mode(): Promise<string | undefined>;
  /** SIGKILL. */
  kill(): Promise<void>;
  /** Starts it again (same port, same data) and waits until it serves. */
  start(): Promise<void>;
  /** SIGSTOP: the process keeps its connections and answers nothing. */
  freeze(): void;
  /** SIGCONT. */
  thaw(): void;
  readonly logFile: string;
}

export interface ZooKeeperEnsemble {
  /** host:port,host:port,host:port */
  connectString: string;
  /** zk://host:port,host:port,host:port */
  url: string;
  members: EnsembleMember[];
  /** The member that is leader now (waits up to `timeoutMs` for one). */
  leader(timeoutMs?: number): Promise<EnsembleMember>;
  /** Waits until every running member serves (after a restart or an election). */
  settled(timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

export interface EnsembleOptions {
  size?: number;
  /**
   * Ticks (of 500 ms) a follower may fall behind or go quiet before the leader drops it, and the
   * other way round (default 5: 2.5 s). A follower frozen for less keeps its place, and runs what
   * it held when it resumes, as after a long GC pause.
   */
  syncLimit?: number;
  /**
   * Where member `from` reaches member `to`'s quorum and election ports (default: the ports
   * themselves). Each member gets its own server.N lines, so a test can put a relay on every
   * directed pair and cut the ensemble apart (test/reliability/zk-split.ts). A member always
   * listens on its own real ports.
   */
  peerAddress?: (from: number, to: number, ports: PeerPorts) => Promise<PeerPorts>;
}

/** A member's quorum (leader-follower) and leader-election ports. */
export interface PeerPorts {
  quorum: number;
  election: number;
}

/** A 3-node ensemble on free ports (client, quorum and election ports), each its own JVM. */
export async function startZooKeeperEnsemble(opts: EnsembleOptions = {}): Promise<ZooKeeperEnsemble> {
  const size = opts.size ?? 3;
  const root = makeRunDir('zookeeper-ensemble');
  const nodes: { id: number; port: number; quorum: number; election: number }[] = [];
  for (let id = 1; id <= size; id++)
    nodes.push({ id, port: await freePort(), quorum: await freePort(), election: await freePort() });
  const serverLines = async (self: number) => {
    const lines: string[] = [];
    for (const { id, quorum, election } of nodes) {
      const to =
        id === self || opts.peerAddress === undefined
          ? { quorum, election }
          : await opts.peerAddress(self, id, { quorum, election });
      lines.push(`server.${id}=${HOST}:${to.quorum}:${to.election}`);
    }
    return lines;
  };
  const configs = await Promise.all(nodes.map(({ id }) => serverLines(id)));
  const members = nodes.map(({ id, port }) => {
    const dir = path.join(root, `zk${id}`);
    const dataDir = path.join(dir, 'data');
    fs.mkdirSync(dataDir, { recursive: true });
    fs.writeFileSync(path.join(dataDir, 'myid'), `${id}\n`);
    const server = serverProcess(
      dir,
      port,
      'org.apache.zookeeper.server.quorum.QuorumPeerMain',
      /Mode: (leader|follower)/,
    );
    fs.writeFileSync(
      server.config,
      [...baseConfig(dataDir, port, opts.syncLimit), ...configs[id - 1]!, ''].join('\n'),
    );
    const member: EnsembleMember = {
      id,
      port,
      get pid() {
        return server.pid;
      },
      logFile: server.logFile,
      mode: async () => {
        const answer = await fourLetterWord(port, 'srvr').catch(() => '');
        return /Mode: (\w+)/.exec(answer)?.[1];
      },
      kill: server.kill,
      start: async () => server.serving(server.spawn()),
      freeze: () => process.kill(server.pid!, 'SIGSTOP'),
      thaw: () => process.kill(server.pid!, 'SIGCONT'),
    };
    return { member, server };
  });
  // A quorum forms only once a majority runs: start them all, then wait.
  const running = members.map(({ server }) => server.spawn());
  await Promise.all(members.map(({ server }, i) => server.serving(running[i]!, 120_000)));
  const connectString = nodes.map((n) => `${HOST}:${n.port}`).join(',');
  const list = members.map((m) => m.member);
  const settled = async (timeoutMs = 60_000) => {
    await waitUntil(
      'every running ZooKeeper member to serve',
      async () => {
        for (const m of list) if (m.pid !== undefined && (await m.mode()) === undefined) return false;
        return true;
      },
      { timeoutMs, intervalMs: 100 },
    );
  };
  return {
    connectString,
    url: `zk://${connectString}`,
    members: list,
    leader: async (timeoutMs = 60_000) => {
      let found: EnsembleMember | undefined;
      await waitUntil(
        'a ZooKeeper leader',
        async () => {
          for (const m of list) if ((await m.mode()) === 'leader') found = m;
          return found !== undefined;
        },
        { timeoutMs, intervalMs: 100 },
      );
      return found!;
    },
    settled,
    stop: async () => {
      for (const { member, server } of members) {
        if (member.pid !== undefined) member.thaw();
        await server.stop();
      }
    },
  };
}
