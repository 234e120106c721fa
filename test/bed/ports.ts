import { readFileSync } from 'node:fs';
import net from 'node:net';

// Ports handed out by this process, so that two components started at the same moment never get the
// same one (nothing listens on either yet when both are picked).
const handedOut = new Set<number>();

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen({ port, host: '127.0.0.1', exclusive: true }, () => {
      server.close(() => resolve(true));
    });
  });
}

/**
 * A port on 127.0.0.1 that nothing listens on right now and that this process has not handed out
 * before, below the kernel's ephemeral range: bed components are stopped and started again on
 * their port (a broker, Redis or ZooKeeper restart), and a port in the ephemeral range may be taken
 * meanwhile by the local end of some outgoing connection, so the restart could not bind it.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = randomFixedPort(0);
    if (handedOut.has(port)) continue;
    if (await canListen(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error('no free port found after 200 attempts');
}

export async function freePorts(count: number): Promise<number[]> {
  const ports: number[] = [];
  for (let i = 0; i < count; i++) ports.push(await freePort());
  return ports;
}

/**
 * Where the kernel's ephemeral ports begin (`net.ipv4.ip_local_port_range`): ports picked at random
 * for fixed layouts (a range, a companion port) stay below it, because a port in it may be taken
 * at any moment by the local end of an outgoing connection (a client dialling a broker), and a
 * listener can then no longer bind it. Read once.
 */
const EPHEMERAL_PORTS_START = ((): number => {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 20_000 ? low : 32_768;
  } catch {
    return 32_768;
  }
})();

/** A random port in [10000, ephemeral start - span), for a layout of `span` + 1 ports from it. */
export function randomFixedPort(span: number): number {
  const top = EPHEMERAL_PORTS_START - span;
  return 10_000 + Math.floor(Math.random() * (top - 10_000));
}

/**
 * A free port P whose companion P + offset is free too. Redis Cluster nodes listen on a second
 * "cluster bus" port at P + 10000, which ephemeral ports (often above 55536) cannot satisfy.
 */
export async function freePortWithCompanion(offset: number): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = randomFixedPort(offset);
    if (handedOut.has(port) || handedOut.has(port + offset)) continue;
    if ((await canListen(port)) && (await canListen(port + offset))) {
      handedOut.add(port);
      handedOut.add(port + offset);
      return port;
    }
  }
  throw new Error(`no free port pair (P, P+${offset}) found after 200 attempts`);
}
