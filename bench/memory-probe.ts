// Where the proxy's memory goes, for one build: at rest and per idle client connection. Not a
// figure to compare builds by (bench/memory.ts pairs those): a breakdown to find what to cut.
//
//   npx tsx bench/memory-probe.ts [--connections N] [--bin <dir>/bin/kafka-offset-proxy.js]
//     [--rest-seconds S] [--no-http] [--top K] [--no-build]
//
// One 1-node Kafka from the test bed and the proxy CLI (with --http, as in production) started with
// `--heapsnapshot-signal`. At rest (after --rest-seconds) and again with N idle connections open
// (each answered one ApiVersions, so the proxy holds its broker connection too): VmRSS split into
// file-backed and anonymous, the anonymous mappings split by kind (V8's heap pages, malloc's,
// the stacks of threads), V8's heap spaces and external memory from the proxy's own /metrics,
// and a heap snapshot (taken after a full collection). The report: each of these at rest and per
// connection, and the snapshot's objects whose count or retained bytes grew with the
// connections, by constructor, per connection.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { startKafka } from '../test/bed/kafka.js';
import { freePortRange, spawnProxy } from '../test/harness/proxy.js';
import { openIdle } from './memory-idle.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const { values: args } = parseArgs({
  options: {
    connections: { type: 'string', default: '1000' },
    bin: { type: 'string' },
    'rest-seconds': { type: 'string', default: '5' },
    'no-http': { type: 'boolean', default: false },
    top: { type: 'string', default: '30' },
    /** Also list what holds the objects of these keys (e.g. 'object Array,closure '), by holder and edge. */
    retainers: { type: 'string', default: '' },
    /** List the N largest objects of the snapshot without connections, with what holds them. */
    biggest: { type: 'string', default: '0' },
    'no-build': { type: 'boolean', default: false },
  },
});
const CONNECTIONS = Number(args.connections);

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const log = (line: string): void => console.log(`[probe] ${line}`);

/** A process's resident memory in kB, by what backs it. */
interface Resident {
  rss: number;
  file: number;
  anon: number;
  /** Anonymous pages in mappings of these kinds (smaps): brk heap, thread stacks, the rest. */
  brk: number;
  stack: number;
  otherAnon: number;
}

/** Resident kB per mapping of a process (/proc/PID/smaps), by kind. */
function resident(pid: number): Resident {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string): number => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1]);
  const out: Resident = {
    rss: kb('VmRSS'),
    file: kb('RssFile'),
    anon: kb('RssAnon'),
    brk: 0,
    stack: 0,
    otherAnon: 0,
  };
  let kind: 'brk' | 'stack' | 'otherAnon' | null = null;
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const header = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ (\d+)\s*(.*)$/.exec(line);
    if (header) {
      const [, inode, name] = header;
      if (name === '[heap]') kind = 'brk';
      else if (name?.startsWith('[stack')) kind = 'stack';
      else if (inode === '0' && (name === '' || name === undefined)) kind = 'otherAnon';
      else kind = null;
      continue;
    }
    const anon = /^Anonymous:\s+(\d+) kB/.exec(line);
    if (anon && kind !== null) out[kind] += Number(anon[1]);
  }
  return out;
}

/** Resident kB of file-backed mappings by file (/proc/PID/smaps), largest first. */
function residentFiles(pid: number): [string, number][] {
  const byFile = new Map<string, number>();
  let file: string | null = null;
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const header = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ (\d+)\s*(.*)$/.exec(line);
    if (header) {
      file = header[1] !== '0' && header[2] ? header[2] : null;
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss && file !== null) byFile.set(file, (byFile.get(file) ?? 0) + Number(rss[1]));
  }
  return [...byFile].sort((a, b) => b[1] - a[1]);
}

/** V8 heap figures from the proxy's Prometheus endpoint (prom-client's default metrics), in kB. */
async function v8Figures(http: string | null): Promise<Record<string, number>> {
  if (http === null) return {};
  const text = await (await fetch(`http://${http}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const m =
      /^(nodejs_heap_space_size_(?:used|total)_bytes\{space="(\w+)"\}|nodejs_external_memory_bytes|nodejs_heap_size_(?:used|total)_bytes) (\S+)/.exec(
        line,
      );
    if (m)
      out[
        m[2] === undefined
          ? m[1]!
          : `${m[1]!.startsWith('nodejs_heap_space_size_used') ? 'used' : 'total'}:${m[2]}`
      ] = Number(m[3]) / 1024;
  }
  return out;
}

/** One heap snapshot: self bytes and count per (type, constructor name). */
interface Snapshot {
  byName: Map<string, { count: number; bytes: number }>;
  /** For the keys in --retainers: count per `holder key . edge name`. */
  holders: Map<string, number>;
  /** The --biggest largest objects: key, bytes, and their holders. */
  biggest: { key: string; bytes: number; heldBy: string[] }[];
  total: number;
}
const RETAINED = new Set(args.retainers.split(',').filter((k) => k !== ''));

function readSnapshot(file: string): Snapshot {
  const json = JSON.parse(readFileSync(file, 'utf8')) as {
    snapshot: {
      meta: { node_fields: string[]; node_types: [string[]]; edge_fields: string[]; edge_types: [string[]] };
    };
    nodes: number[];
    edges: number[];
    strings: string[];
  };
  const fields = json.snapshot.meta.node_fields;
  const types = json.snapshot.meta.node_types[0];
  const width = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const sizeAt = fields.indexOf('self_size');
  const byName = new Map<string, { count: number; bytes: number }>();
  let total = 0;
  for (let i = 0; i < json.nodes.length; i += width) {
    const type = types[json.nodes[i + typeAt]!]!;
    let name = json.strings[json.nodes[i + nameAt]!]!;
    // Strings and code by kind only: their names are their contents.
    if (type.includes('string') || type === 'code' || type === 'number') name = '';
    if (name.length > 60) name = `${name.slice(0, 57)}...`;
    const key = `${type} ${name}`;
    const bytes = json.nodes[i + sizeAt]!;
    total += bytes;
    const entry = byName.get(key);
    if (entry) {
      entry.count++;
      entry.bytes += bytes;
    } else byName.set(key, { count: 1, bytes });
  }
  const holders = new Map<string, number>();
  const biggestN = Number(args.biggest);
  const big = new Map<number, { key: string; bytes: number; heldBy: string[] }>();
  if (biggestN > 0) {
    const sizes: [number, number][] = [];
    for (let i = 0; i < json.nodes.length; i += width) sizes.push([i, json.nodes[i + sizeAt]!]);
    sizes.sort((a, b) => b[1] - a[1]);
    for (const [i, bytes] of sizes.slice(0, biggestN)) {
      const type = types[json.nodes[i + typeAt]!]!;
      big.set(i, {
        key: `${type} ${json.strings[json.nodes[i + nameAt]!]!.slice(0, 60)}`,
        bytes,
        heldBy: [],
      });
    }
  }
  if (RETAINED.size > 0) {
    const keyOf = (i: number): string => {
      const type = types[json.nodes[i + typeAt]!]!;
      let name = json.strings[json.nodes[i + nameAt]!]!;
      if (type.includes('string') || type === 'code' || type === 'number') name = '';
      if (name.length > 60) name = `${name.slice(0, 57)}...`;
      return `${type} ${name}`;
    };
    const meta = json.snapshot.meta;
    const edgeWidth = meta.edge_fields.length;
    const edgeTypes = meta.edge_types[0];
    const countAt = fields.indexOf('edge_count');
    let edge = 0;
    for (let i = 0; i < json.nodes.length; i += width) {
      const parent = keyOf(i);
      for (let e = 0; e < json.nodes[i + countAt]!; e++, edge += edgeWidth) {
        const to = json.edges[edge + 2]!;
        const type = edgeTypes[json.edges[edge]!]!;
        if (type === 'weak') continue;
        const nameOrIndex = json.edges[edge + 1]!;
        const edgeName = type === 'element' || type === 'hidden' ? `[${type}]` : json.strings[nameOrIndex];
        const child = keyOf(to);
        if (!RETAINED.has(child)) continue;
        const k = `${child} <- ${parent} .${edgeName}`;
        holders.set(k, (holders.get(k) ?? 0) + 1);
      }
    }
  }
  // The chain of first holders of each of the biggest, up to 8 steps, one pass over the edges per step.
  if (big.size > 0) {
    const meta = json.snapshot.meta;
    const edgeWidth = meta.edge_fields.length;
    const edgeTypes = meta.edge_types[0];
    const countAt = fields.indexOf('edge_count');
    let frontier = new Map<number, number>([...big.keys()].map((i) => [i, i]));
    for (let depth = 0; depth < 8 && frontier.size > 0; depth++) {
      const next = new Map<number, number>();
      let edge = 0;
      for (let i = 0; i < json.nodes.length; i += width) {
        for (let e = 0; e < json.nodes[i + countAt]!; e++, edge += edgeWidth) {
          const to = json.edges[edge + 2]!;
          const root = frontier.get(to);
          if (root === undefined || next.has(root) || [...next.values()].includes(i)) continue;
          const type = edgeTypes[json.edges[edge]!]!;
          if (type === 'weak') continue;
          const nameOrIndex = json.edges[edge + 1]!;
          const edgeName =
            type === 'element' || type === 'hidden' ? `[${nameOrIndex}]` : json.strings[nameOrIndex];
          big
            .get(root)!
            .heldBy.push(
              `${types[json.nodes[i + typeAt]!]} ${json.strings[json.nodes[i + nameAt]!]!.slice(0, 40)} .${edgeName}`,
            );
          next.set(root, i);
        }
      }
      frontier = new Map([...next].map(([root, at]) => [at, root]));
    }
  }
  return { byName, holders, biggest: [...big.values()], total };
}

async function snapshot(pid: number, dir: string): Promise<Snapshot> {
  const before = new Set(readdirSync(dir));
  process.kill(pid, 'SIGUSR2');
  for (;;) {
    await sleep(500);
    const fresh = readdirSync(dir).filter((f) => !before.has(f) && f.endsWith('.heapsnapshot'));
    if (fresh.length === 0) continue;
    const file = path.join(dir, fresh[0]!);
    // Written in pieces: parse once its size stops changing.
    let size = -1;
    for (;;) {
      const now = Number(execFileSync('stat', ['-c', '%s', file]).toString());
      if (now === size && now > 0) break;
      size = now;
      await sleep(500);
    }
    return readSnapshot(file);
  }
}

async function main(): Promise<void> {
  if (!args['no-build'] && args.bin === undefined)
    execFileSync('npm', ['run', 'build', '--silent'], { cwd: repo, stdio: 'inherit' });
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kop-memory-probe-'));
  const cluster = await startKafka({ brokers: 1 });
  const nodeId = cluster.brokers[0]!.nodeId;
  const http = args['no-http'] ? null : `127.0.0.1:${await freePortRange(1)}`;
  const proxy = await spawnProxy(
    ['--bootstrap-server', cluster.bootstrap, '--log-level', 'info', ...(http ? ['--http', http] : [])],
    {},
    ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${dir}`],
    args.bin === undefined ? undefined : path.resolve(args.bin),
  );
  const pid = proxy.child.pid!;
  try {
    await sleep(Number(args['rest-seconds']) * 1000);
    // Snapshots only after every RSS reading: a snapshot's own memory (malloc'd) would be reused by
    // the connections' allocations and hide them.
    const rest = resident(pid);
    const restV8 = await v8Figures(http);
    log(`at rest: ${JSON.stringify(rest)} kB`);
    log(`at rest, V8 (kB): ${JSON.stringify(restV8)}`);
    log(
      `at rest, file-backed kB by file: ${residentFiles(pid)
        .slice(0, 8)
        .map(([f, kb]) => `${f} ${kb}`)
        .join(', ')}`,
    );
    const conns = await openIdle(`127.0.0.1:${proxy.port + 1 + nodeId}`, CONNECTIONS);
    await sleep(1000);
    const open = resident(pid);
    const openV8 = await v8Figures(http);
    const per = (a: number, b: number): string => (((b - a) * 1024) / CONNECTIONS).toFixed(0);
    log(`with ${CONNECTIONS} connections: ${JSON.stringify(open)} kB`);
    log(
      `bytes per connection: ${Object.keys(open)
        .map((k) => `${k} ${per(rest[k as keyof Resident], open[k as keyof Resident])}`)
        .join(', ')}`,
    );
    log(
      `V8 bytes per connection: ${Object.keys(openV8)
        .map((k) => `${k} ${per(restV8[k] ?? 0, openV8[k]!)}`)
        .join(', ')}`,
    );
    const openSnap = await snapshot(pid, dir);
    for (const c of conns) c.close();
    await sleep(3000);
    const restSnap = await snapshot(pid, dir);
    log(`heap snapshot without the connections: ${(restSnap.total / 1024).toFixed(0)} kB`);
    const byType = new Map<string, number>();
    for (const [key, o] of restSnap.byName) {
      const type = key.split(' ')[0]!;
      byType.set(type, (byType.get(type) ?? 0) + o.bytes);
    }
    log(
      `without the connections, kB by type: ${[...byType]
        .sort((a, b) => b[1] - a[1])
        .map(([t, b]) => `${t} ${(b / 1024).toFixed(0)}`)
        .join(', ')}`,
    );
    const named = [...restSnap.byName].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, 25);
    log(
      `without the connections, largest kinds (kB): ${named.map(([k, o]) => `${k} ${(o.bytes / 1024).toFixed(0)} (${o.count})`).join('; ')}`,
    );
    for (const b of restSnap.biggest)
      log(`  ${(b.bytes / 1024).toFixed(0)} kB ${b.key} <- ${b.heldBy.join(' <- ')}`);
    log(
      `heap snapshot bytes per connection: ${((openSnap.total - restSnap.total) / CONNECTIONS).toFixed(0)}`,
    );
    const rows = [...openSnap.byName].map(([key, o]) => {
      const r = restSnap.byName.get(key) ?? { count: 0, bytes: 0 };
      return { key, count: (o.count - r.count) / CONNECTIONS, bytes: (o.bytes - r.bytes) / CONNECTIONS };
    });
    rows.sort((a, b) => b.bytes - a.bytes);
    console.log('\n| objects (type constructor) | per connection | bytes per connection |\n|---|---:|---:|');
    for (const r of rows.slice(0, Number(args.top)))
      console.log(`| ${r.key} | ${r.count.toFixed(2)} | ${r.bytes.toFixed(0)} |`);
    if (RETAINED.size > 0) {
      const held = [...openSnap.holders].map(([k, n]) => ({
        k,
        n: (n - (restSnap.holders.get(k) ?? 0)) / CONNECTIONS,
      }));
      held.sort((a, b) => b.n - a.n);
      console.log('\n| held object <- holder .edge | per connection |\n|---|---:|');
      for (const h of held.filter((x) => x.n >= 0.05)) console.log(`| ${h.k} | ${h.n.toFixed(2)} |`);
    }
  } finally {
    await proxy.stop();
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
