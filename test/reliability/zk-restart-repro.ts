// Reproduction of the uncaught exception seen once in reliability-faults.test.ts
// ("Error: Unknown code: -493289471", thrown by node-zookeeper-client's Exception.validateCode):
// commits run on the ZooKeeper store while the ZooKeeper server is stopped and started again and
// again. Any uncaught exception is printed with its stack and counted; in the CLI proxy such an
// exception would end the process.
//
//   npx tsx test/reliability/zk-restart-repro.ts [restarts=15] [writers=6] [--patch] [--recover]
//
// --recover does what the CLI does since 261ce38 (proxy/cli.ts): the process-level handler asks
// store.recoverFromFault(err), which replaces the broken client. The script then also checks that
// commits still succeed after the last restart.
//
// This is a known, open bug of node-zookeeper-client (alexguan/node-zookeeper-client issues #23,
// 2014, and #70, 2017: "Unknown code: <random>" from ConnectionManager.onSocketData, line 570,
// after connectivity problems): a reply is parsed at a wrong offset and the garbage "error code"
// makes Exception.create throw inside the socket's 'data' handler, where nothing can catch it.
// Measured here (6 writers): 1 uncaught exception in 15 restarts.
//
// --patch tests one hypothesis, and refutes it: clearing the library's `pendingBuffer` (bytes of a
// partial reply) when the socket closes does NOT stop it (7 uncaught in 40 restarts with it).
//
import { openStore } from '../../backends/open-store.js';
import { startZooKeeper } from '../bed/zookeeper.js';
import { sleep } from './commit-checker.js';

const args = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const recover = process.argv.includes('--recover');
const restarts = Number(args[0] ?? 15);
const writers = Number(args[1] ?? 6);
if (process.argv.includes('--patch')) {
  const { createRequire } = await import('node:module');
  const require = createRequire(import.meta.url);
  const CM = require('node-zookeeper-client/lib/ConnectionManager.js') as {
    prototype: { onSocketClosed(this: { pendingBuffer: Buffer | null }, hasError: boolean): void };
  };
  const original = CM.prototype.onSocketClosed;
  CM.prototype.onSocketClosed = function (hasError) {
    this.pendingBuffer = null;
    original.call(this, hasError);
  };
  console.log('patched: pendingBuffer is cleared when the socket closes (hypothesis check)');
}
const uncaught: Error[] = [];
let recovered = 0;
const zk = await startZooKeeper();
const store = await openStore(zk.url, { operationTimeoutMs: 1000 });
process.on('uncaughtException', (err) => {
  if (recover && store.recoverFromFault?.(err)) {
    recovered++;
    console.log(`recovered from a client fault: ${err.message}`);
    return;
  }
  uncaught.push(err);
  console.log(`UNCAUGHT #${uncaught.length}: ${err.stack ?? String(err)}`);
});
let running = true;
let ok = 0;
let failed = 0;
let seq = 0;
const loops = Array.from({ length: writers }, async (_, w) => {
  let offset = 0n;
  while (running) {
    offset++;
    try {
      await store.commit({
        group: `repro-${w}`,
        writes: [0, 1, 2].map((partition) => ({
          topic: 'repro',
          partition,
          offset,
          leaderEpoch: -1,
          metadata: '',
          commitTimestamp: BigInt(Date.now()),
          expireTimestamp: -1n,
        })),
        requestId: `r-${w}-${seq++}`,
      });
      ok++;
    } catch {
      failed++;
      await sleep(20);
    }
  }
});
try {
  for (let i = 0; i < restarts; i++) {
    await sleep(500 + Math.floor(Math.random() * 1500));
    await zk.stop();
    await sleep(500 + Math.floor(Math.random() * 3000));
    await zk.start();
    console.log(
      `restart ${i + 1}/${restarts}: ${ok} commits ok, ${failed} failed, ${uncaught.length} uncaught`,
    );
  }
  const before = ok;
  await sleep(2000);
  if (ok === before) {
    console.log('no commit succeeded in the 2 s after the last restart');
    uncaught.push(new Error('stuck'));
  }
} finally {
  running = false;
  await Promise.allSettled(loops);
  await store.close();
  await zk.stop();
}
console.log(
  `done: ${ok} commits ok, ${failed} failed, ${uncaught.length} uncaught exceptions, ${recovered} recovered`,
);
process.exit(uncaught.length > 0 ? 1 : 0);
