import net from 'node:net';

/**
 * Sends one inline command to a Redis server and returns its first reply line (e.g. "+PONG",
 * "-LOADING ...") or, for a bulk string reply, its payload. Deliberately tiny: readiness checks
 * must not depend on a client library's reconnect logic.
 */
export function redisCommand(host: string, port: number, command: string, timeoutMs = 2000): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port });
    let data = '';
    const done = (error: Error | undefined, value?: string) => {
      socket.destroy();
      if (error) reject(error);
      else resolve(value ?? '');
    };
    socket.setTimeout(timeoutMs, () => done(new Error(`no reply to ${command} from ${host}:${port}`)));
    socket.once('error', (error) => done(error));
    socket.once('connect', () => socket.write(`${command}\r\n`));
    socket.on('data', (chunk) => {
      data += chunk.toString('utf8');
      const firstEnd = data.indexOf('\r\n');
      if (firstEnd < 0) return;
      const first = data.slice(0, firstEnd);
      if (!first.startsWith('$')) return done(undefined, first);
      const length = Number(first.slice(1));
      if (length < 0) return done(undefined, '');
      const body = data.slice(firstEnd + 2);
      if (Buffer.byteLength(body) >= length + 2) done(undefined, body.slice(0, length));
    });
  });
}
