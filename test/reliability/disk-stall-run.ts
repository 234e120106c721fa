// Issue #43, the embedded store on a disk whose writes stall: the CLI proxy with --data-dir on a
// FUSE mount (stall-disk.ts) in front of a broker of the bed, raw clients committing to a few
// groups on long-lived connections, ApiVersions and Metadata probes, and /readyz polled. The
// disk stalls for --stall-s seconds and is released. Holds when commits sent during the stall are
// answered (never acknowledged) within the store deadline, one whose write was on the disk when it
// stalled is answered when the disk answers, the probes keep being answered, /readyz
// says 503 during the stall and 200 soon after, no connection drops, every acknowledged commit
// reads back and commits are acknowledged again. Not in npm test: CI machines may lack /dev/fuse.
//   npm run disk-stall-run -- [--stall-s 8]   (root, /dev/fuse, python3-fusepy, libfuse2)
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';
import { loadavg } from 'node:os';
import { createTopics } from '../bed/clients/kafkajs.js';
import { startKafka } from '../bed/kafka.js';
import { freePort } from '../bed/ports.js';
import { ensureBuilt, spawnProxy } from '../harness/proxy.js';
import type { ProxyProcess } from '../harness/proxy.js';
import { metadataRequestBody, RawClient } from '../harness/raw-client.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { defaultApiVersionsRequest } from '../../protocol/messages/api-versions-request.js';
import { commitOnce, fetchOnce, sleep } from './commit-checker.js';
import { StallDisk } from './stall-disk.js';

const GROUPS = 4;
const PARTITIONS = 4;
const STORE_TIMEOUT_MS = 1000;
// Retriable answers to a commit the store could not write: COORDINATOR_LOAD_IN_PROGRESS,
// COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, REQUEST_TIMED_OUT.
const RETRIABLE = new Set([14, 15, 16, 7]);

type Phase = 'before' | 'stall' | 'after';
interface Answer {
  phase: Phase;
  sentAt: number;
  ms: number;
  codes: number[];
}

async function main(): Promise<number> {
  const stallArg = process.argv.indexOf('--stall-s');
  const stallS = stallArg > 0 ? Number(process.argv[stallArg + 1]) : 8;
  await ensureBuilt();
  const disk = await StallDisk.mount();
  const kafka = await startKafka();
  let proxy: ProxyProcess | undefined;
  try {
    const topic = `disk-stall-${Date.now()}`;
    await createTopics({ bootstrap: kafka.bootstrap }, [{ topic, partitions: PARTITIONS }]);
    const http = await freePort();
    proxy = await spawnProxy([
      '--bootstrap-server',
      kafka.bootstrap,
      '--data-dir',
      join(disk.path, 'data'),
      '--store-timeout-ms',
      String(STORE_TIMEOUT_MS),
      '--http',
      `127.0.0.1:${http}`,
    ]);
    const p = proxy;
    let phase: Phase = 'before';
    let running = true;
    let stallEnd = 0;
    const answers: Answer[][] = [];
    const acked: bigint[] = Array(GROUPS).fill(-1n);
    const clients: RawClient[] = [];
    // The last group starts committing once the stall began: its commits find the transaction
    // stuck and queue behind it, where the others' were already inside it.
    const committers = Array.from({ length: GROUPS }, async (_, g) => {
      const client = await RawClient.connect(p.bootstrap);
      while (g === GROUPS - 1 && phase === 'before') await sleep(20);
      clients.push(client);
      const mine: Answer[] = (answers[g] = []);
      for (let offset = 1n; running; offset++) {
        const sentAt = Date.now();
        const ph = phase;
        const codes = await commitOnce(client, `${topic}-g${g}`, topic, PARTITIONS, offset);
        mine.push({ phase: ph, sentAt, ms: Date.now() - sentAt, codes });
        if (codes.every((c) => c === 0)) acked[g] = offset;
        else await sleep(50);
      }
    });
    const probeMs: Record<Phase, number[]> = { before: [], stall: [], after: [] };
    const probe = (async () => {
      const client = await RawClient.connect(p.bootstrap);
      clients.push(client);
      for (let id = 1; running; id += 2) {
        const ph = phase;
        const t = Date.now();
        await client.request(ApiKey.ApiVersions, 3, id, defaultApiVersionsRequest());
        await client.request(ApiKey.Metadata, 12, id + 1, metadataRequestBody([topic]));
        probeMs[ph].push(Date.now() - t);
        await sleep(100);
      }
    })();
    const ready: { phase: Phase; at: number; status: number }[] = [];
    const readiness = (async () => {
      while (running) {
        const ph = phase;
        const status = await fetch(`http://127.0.0.1:${http}/readyz`, { signal: AbortSignal.timeout(5000) })
          .then((r) => r.status)
          .catch(() => 0);
        ready.push({ phase: ph, at: Date.now(), status });
        await sleep(200);
      }
    })();

    await sleep(3000);
    const logBefore = p.output().length;
    disk.stall();
    phase = 'stall';
    const stallStart = Date.now();
    await sleep(stallS * 1000);
    disk.release();
    stallEnd = Date.now();
    phase = 'after';
    await sleep(10_000);
    running = false;
    await Promise.race([
      Promise.all([...committers, probe, readiness]),
      sleep(15_000).then(() => {
        throw new Error('a client hung after the run');
      }),
    ]);

    // Verdicts.
    const all = answers.flat();
    // Every commit in flight at some point of the stall, also one sent just before it.
    const stalled = all.filter((a) => a.sentAt < stallEnd && a.sentAt + a.ms > stallStart);
    const queued = stalled.filter((a) => a.sentAt > stallStart + 100);
    const maxQueuedMs = Math.max(0, ...queued.map((a) => a.ms));
    // Acknowledged while the disk wrote nothing: an answer before the release (the control file
    // takes effect within the file system's poll, hence the 100 ms).
    const stalledAcked = stalled.filter((a) => {
      const answeredAt = a.sentAt + a.ms;
      return a.codes.every((c) => c === 0) && answeredAt > stallStart + 100 && answeredAt < stallEnd;
    });
    const stalledBad = stalled.filter((a) => a.codes.some((c) => c !== 0 && !RETRIABLE.has(c)));
    const maxStallAnswerMs = Math.max(0, ...stalled.map((a) => a.ms));
    const inFlightLateMs = Math.max(
      -Infinity,
      ...stalled.filter((a) => a.sentAt <= stallStart + 100).map((a) => a.sentAt + a.ms - stallEnd),
    );
    const codeCounts: Record<number, number> = {};
    for (const a of stalled) for (const c of a.codes) codeCounts[c] = (codeCounts[c] ?? 0) + 1;
    const firstAckAfter = Math.min(
      ...all.filter((a) => a.sentAt >= stallEnd && a.codes.every((c) => c === 0)).map((a) => a.sentAt + a.ms),
    );
    const probeMax = (ph: Phase) => Math.max(0, ...probeMs[ph]);
    const readyDuring = ready.filter((r) => r.phase === 'stall' && r.at > stallStart + 3 * STORE_TIMEOUT_MS);
    const first200 = ready.find((r) => r.phase === 'after' && r.status === 200);
    const dropped = clients.filter((c) => c.hasClosed).length;
    let lost = 0;
    const reader = await RawClient.connect(p.bootstrap);
    try {
      for (let g = 0; g < GROUPS; g++) {
        const { offsets } = await fetchOnce(reader, `${topic}-g${g}`, topic, PARTITIONS);
        for (const v of offsets.values()) if (v < acked[g]!) lost++;
      }
    } finally {
      reader.close();
    }
    const warnings = p
      .output()
      .slice(logBefore)
      .split('\n')
      .filter((l) => /"level":"(warn|error)"/.test(l));
    for (const w of warnings.slice(0, 3)) console.log(`[disk-stall] log: ${w.slice(0, 400)}`);
    console.log(
      `[disk-stall] stall codes ${JSON.stringify(codeCounts)}, answers during stall ${stalled.length}`,
    );
    console.log(`[disk-stall] readyz during stall ${JSON.stringify(readyDuring.map((r) => r.status))}`);
    const checks: [string, boolean][] = [
      ['no commit acknowledged during the stall', stalledAcked.length === 0],
      ['only retriable codes during the stall', stalledBad.length === 0],
      [
        `commits queued in the stall answered within ${STORE_TIMEOUT_MS} ms + 1 s`,
        queued.length > 0 && maxQueuedMs <= STORE_TIMEOUT_MS + 1000,
      ],
      // A commit whose write was on the disk when it stalled is answered when the disk answers,
      // as a broker's append waits for its log: never acknowledged before that, never lost after.
      ['commits in flight at the stall answered within 1 s of the release', inFlightLateMs <= 1000],
      ['probes answered during the stall', probeMs.stall.length > 0 && probeMax('stall') < 1000],
      ['readyz 503 during the stall', readyDuring.length > 0 && readyDuring.every((r) => r.status === 503)],
      ['readyz 200 within 5 s after', first200 !== undefined && first200.at - stallEnd <= 5000],
      ['no connection dropped', dropped === 0],
      ['0 acknowledged commits lost', lost === 0],
      ['commits acknowledged after the release', Number.isFinite(firstAckAfter)],
      ['a warning logged during the stall', warnings.length > 0],
      ['proxy still running', p.child.exitCode === null],
    ];
    for (const [what, ok] of checks) if (!ok) console.log(`[disk-stall] FAILED: ${what}`);
    const pass = checks.every(([, ok]) => ok);
    console.log(
      `RESULT disk-stall ${pass ? 'PASS' : 'FAIL'} stall=${stallS}s commits=${all.length} ` +
        `stall_answers=${stalled.length} stall_acked=${stalledAcked.length} max_stall_answer_ms=${maxStallAnswerMs} ` +
        `in_flight_answered_after_release_ms=${inFlightLateMs} ` +
        `queued=${queued.length} max_queued_ms=${maxQueuedMs} ` +
        `probe_max_ms before=${probeMax('before')} stall=${probeMax('stall')} after=${probeMax('after')} ` +
        `ready_200_after_ms=${first200 ? first200.at - stallEnd : 'never'} first_ack_after_ms=${firstAckAfter - stallEnd} ` +
        `dropped=${dropped} lost=${lost} load=${loadavg()
          .map((l) => l.toFixed(1))
          .join('/')}`,
    );
    for (const c of clients) c.close();
    return pass ? 0 : 1;
  } finally {
    disk.release();
    await proxy?.stop('SIGKILL');
    await kafka.stop();
    disk.unmount();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().then(
    (code) => process.exit(code),
    (err: unknown) => {
      console.error(err);
      process.exit(2);
    },
  );
}
