// The layers of the code and which may import which: the one statement of the architecture that
// both the lint (eslint.config.js, rule layers/imports) and test/unit/layers.test.ts enforce.
// A file belongs to the layer of the longest folder below that holds it; tests (*.test.ts) and
// files outside these folders (test/, bench/, scripts/) are not part of any layer.
import path from 'node:path';

/** @typedef {{ name: string, dir: string, may: readonly string[] | '*', what: string }} Layer */

/** @type {readonly Layer[]} */
export const LAYERS = [
  { name: 'protocol', dir: 'protocol', may: [], what: 'the Kafka codec: generated messages, framing' },
  { name: 'backends', dir: 'backends', may: [], what: 'offset stores behind one interface; no wire types' },
  { name: 'common', dir: 'proxy/common', may: [], what: 'helpers that know nothing of the proxy' },
  {
    name: 'core',
    dir: 'proxy/core',
    may: ['protocol', 'common'],
    what: 'the transparent relay; knows nothing of offsets, stores or the process',
  },
  {
    name: 'client',
    dir: 'proxy/client',
    may: ['protocol', 'core', 'common'],
    what: "the proxy's own Kafka client",
  },
  {
    name: 'offsets',
    dir: 'proxy/offsets',
    may: ['protocol', 'backends', 'core', 'client', 'common'],
    what: 'the offset service behind the extension point',
  },
  {
    name: 'ops',
    dir: 'proxy/ops',
    may: ['protocol', 'backends', 'core', 'client', 'offsets', 'common'],
    what: 'admin, HTTP, lag and metrics',
  },
  { name: 'root', dir: 'proxy', may: '*', what: 'the composition root: CLI, configuration, wiring' },
];

/**
 * The layer of a repository-relative path, or null for tests and files outside every layer.
 * @param {string} file
 * @returns {Layer | null}
 */
export function layerOf(file) {
  const f = file.split(path.sep).join('/');
  if (/\.test\.[cm]?[jt]s$/.test(f)) return null;
  /** @type {Layer | null} */
  let best = null;
  for (const layer of LAYERS) {
    if (f.startsWith(`${layer.dir}/`) && (best === null || layer.dir.length > best.dir.length)) best = layer;
  }
  return best;
}

/**
 * Why `from` may not import `to` (both repository-relative), or null when it may.
 * @param {string} from
 * @param {string} to
 * @returns {string | null}
 */
export function layerViolation(from, to) {
  const source = layerOf(from);
  if (source === null || source.may === '*') return null;
  const target = layerOf(to);
  if (target === null) {
    // Outside every layer: a test suite or harness, never imported by product code.
    return `${source.name} (${source.dir}/) may not import ${to}, which is in no layer`;
  }
  if (target === source || source.may.includes(target.name)) return null;
  const allowed = source.may.length === 0 ? 'nothing outside itself' : source.may.join(', ');
  return `${source.name} (${source.dir}/) may not import ${target.name} (${to}); it may import ${allowed}`;
}

/**
 * The repository-relative file a relative specifier of `from` names (`.js` resolved to the `.ts`
 * source the way NodeNext does), or null for a package.
 * @param {string} from
 * @param {string} specifier
 * @returns {string | null}
 */
export function resolveImport(from, specifier) {
  if (!specifier.startsWith('.')) return null;
  const joined = path.posix.normalize(path.posix.join(path.posix.dirname(from), specifier));
  return joined.endsWith('.js') ? `${joined.slice(0, -3)}.ts` : joined;
}
