// The deployment artefacts as data: the Helm chart rendered by the pinned helm, the plain manifests,
// the Docker image's ENV/ENTRYPOINT and the systemd unit with its environment file. Each is turned
// into what the proxy would really receive (a command line and an environment), so tests check it
// with the proxy's own OPTIONS and loadConfig, and can run exactly that.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { BrokerMap } from '../../proxy/core/broker-map.js';
import { envName, loadConfig, OPTIONS } from '../../proxy/config.js';
import type { ProxyConfig } from '../../proxy/config.js';
import { bedCacheDir } from '../bed/kafka.js';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const CHART_DIR = path.join(REPO, 'deploy/helm/kafka-offset-proxy');
export const EXAMPLES_DIR = path.join(CHART_DIR, 'examples');
export const KUBERNETES_DIR = path.join(REPO, 'deploy/kubernetes');
export const SYSTEMD_DIR = path.join(REPO, 'deploy/systemd');
/** What deploy/kubernetes/ is rendered as. */
export const MANIFESTS = {
  values: path.join(KUBERNETES_DIR, 'values.yaml'),
  output: path.join(KUBERNETES_DIR, 'kafka-offset-proxy.yaml'),
  release: 'kafka-offset-proxy',
  namespace: 'kafka',
};

// ---- helm --------------------------------------------------------------------------------------

const INSTALL_SCRIPT = path.join(REPO, 'scripts/install-helm.sh');

/** The helm version scripts/install-helm.sh pins (the one place it is written). */
export function helmVersion(): string {
  const m = /^HELM_VERSION=(v\d+\.\d+\.\d+)$/m.exec(fs.readFileSync(INSTALL_SCRIPT, 'utf8'));
  if (!m) throw new Error(`no HELM_VERSION=vX.Y.Z line in ${INSTALL_SCRIPT}`);
  return m[1]!;
}

/** The pinned helm binary where scripts/install-helm.sh puts it (or KOP_HELM). */
export function helmBinary(): string {
  const bin = process.env['KOP_HELM'] ?? path.join(bedCacheDir(), `helm-${helmVersion()}`, 'helm');
  if (!fs.existsSync(bin)) {
    throw new Error(`helm ${helmVersion()} is not installed at ${bin}: run scripts/install-helm.sh`);
  }
  return bin;
}

export interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function helm(args: string[]): HelmResult {
  try {
    const stdout = execFileSync(helmBinary(), args, {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      // No repository or plugin configuration of the developer's own helm.
      env: { PATH: process.env['PATH'], HOME: path.join(REPO, '.tmp/helm-home'), HELM_NO_PLUGINS: '1' },
      timeout: 60_000,
    });
    return { code: 0, stdout, stderr: '' };
  } catch (err) {
    const e = err as { status?: number; stdout?: string; stderr?: string };
    return { code: e.status ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? String(err) };
  }
}

export interface RenderOptions {
  release?: string;
  namespace?: string;
  /** --set expressions, for the failure cases. */
  set?: string[];
}

/** `helm template` of the chart with these values files; throws with helm's message on failure. */
export function renderChart(valuesFiles: string[], opts: RenderOptions = {}): string {
  const r = helm(templateArgs(valuesFiles, opts));
  if (r.code !== 0) throw new Error(`helm template failed (${r.code}): ${r.stderr.trim()}`);
  return r.stdout;
}

export function templateArgs(valuesFiles: string[], opts: RenderOptions = {}): string[] {
  return [
    'template',
    opts.release ?? 'kop',
    CHART_DIR,
    '--namespace',
    opts.namespace ?? 'kafka',
    ...valuesFiles.flatMap((f) => ['--values', f]),
    ...(opts.set ?? []).flatMap((s) => ['--set', s]),
  ];
}

/** The plain manifests as they must read: the header, then the chart rendered with their values. */
export function renderManifests(): string {
  const rendered = renderChart([MANIFESTS.values], {
    release: MANIFESTS.release,
    namespace: MANIFESTS.namespace,
  });
  const header = [
    '# Generated from the Helm chart deploy/helm/kafka-offset-proxy with deploy/kubernetes/values.yaml',
    `# (release ${MANIFESTS.release}, namespace ${MANIFESTS.namespace}) by \`npm run deploy:render\`; do not edit.`,
    '# Apply with: kubectl apply -n kafka -f deploy/kubernetes/kafka-offset-proxy.yaml (docs/deploy.md).',
  ].join('\n');
  return `${header}\n${rendered}`;
}

/** The documented values examples: every file of the chart's examples/ and the manifests' values. */
export function valuesExamples(): { name: string; file: string }[] {
  const examples = fs
    .readdirSync(EXAMPLES_DIR)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((f) => ({ name: `examples/${f}`, file: path.join(EXAMPLES_DIR, f) }));
  return [...examples, { name: 'deploy/kubernetes/values.yaml', file: MANIFESTS.values }];
}

// ---- Kubernetes objects ------------------------------------------------------------------------

/* eslint-disable @typescript-eslint/no-explicit-any -- rendered manifests are untyped YAML */
export type K8sObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; [k: string]: any };
} & Record<string, any>;

export function parseObjects(text: string): K8sObject[] {
  return parseAllDocuments(text)
    .map((doc) => {
      if (doc.errors.length > 0) throw new Error(`rendered YAML does not parse: ${doc.errors[0]!.message}`);
      return doc.toJS() as K8sObject | null;
    })
    .filter((o): o is K8sObject => o !== null);
}

export function objectsOf(objects: K8sObject[], kind: string): K8sObject[] {
  return objects.filter((o) => o.kind === kind);
}

export function onlyObject(objects: K8sObject[], kind: string, name?: string): K8sObject {
  const found = objectsOf(objects, kind).filter((o) => name === undefined || o.metadata.name === name);
  if (found.length !== 1)
    throw new Error(`expected one ${kind}${name ? ` ${name}` : ''}, found ${found.length}`);
  return found[0]!;
}

/** Values of Secrets that exist outside the chart, as a test supplies them: name -> key -> value. */
export type SecretValues = Record<string, Record<string, string>>;

/** The Secrets the chart itself renders, decoded. */
export function renderedSecrets(objects: K8sObject[]): SecretValues {
  const out: SecretValues = {};
  for (const s of objectsOf(objects, 'Secret')) {
    out[s.metadata.name] = Object.fromEntries(
      Object.entries((s['data'] ?? {}) as Record<string, string>).map(([k, v]) => [
        k,
        Buffer.from(v, 'base64').toString('utf8'),
      ]),
    );
  }
  return out;
}

/**
 * A container's environment as Kubernetes hands it to the process: secretKeyRef values looked up,
 * and $(NAME) references to variables defined earlier in the list replaced (`$$` is a literal `$`;
 * a reference to an undefined variable stays as it is, as in Kubernetes).
 */
export function containerEnvironment(container: any, secrets: SecretValues): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of (container.env ?? []) as any[]) {
    let value: string;
    if (e.valueFrom !== undefined) {
      const ref = e.valueFrom.secretKeyRef;
      if (!ref)
        throw new Error(`env ${e.name}: only secretKeyRef is supported, got ${JSON.stringify(e.valueFrom)}`);
      const v = secrets[ref.name]?.[ref.key];
      if (v === undefined) throw new Error(`env ${e.name}: no value for Secret ${ref.name} key ${ref.key}`);
      value = v;
    } else {
      value = String(e.value ?? '').replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, name?: string) =>
        m === '$$' ? '$' : name !== undefined && name in env ? env[name]! : m,
      );
    }
    env[e.name] = value;
  }
  return env;
}

// ---- the Docker image --------------------------------------------------------------------------

export interface ImageSpec {
  /** ENV of the final stage. */
  env: Record<string, string>;
  entrypoint: string[];
  workdir: string;
}

/** ENV, ENTRYPOINT and WORKDIR of the Dockerfile's last stage (the image the chart runs). */
export function dockerImage(): ImageSpec {
  const text = fs.readFileSync(path.join(REPO, 'Dockerfile'), 'utf8').replace(/\\\n/g, ' ');
  const lines = text.split('\n').filter((l) => l.trim() !== '' && !l.trimStart().startsWith('#'));
  const lastFrom = lines.map((l) => /^FROM\s/i.test(l)).lastIndexOf(true);
  const spec: ImageSpec = { env: {}, entrypoint: [], workdir: '/' };
  for (const line of lines.slice(lastFrom)) {
    const [, instruction, rest] = /^(\w+)\s+(.*)$/.exec(line.trim()) ?? [];
    if (instruction === 'ENV') {
      for (const m of rest!.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|\S*)/g)) {
        spec.env[m[1]!] = m[2]!.replace(/^"|"$/g, '');
      }
    } else if (instruction === 'ENTRYPOINT') {
      spec.entrypoint = JSON.parse(rest!) as string[];
    } else if (instruction === 'WORKDIR') {
      spec.workdir = rest!.trim();
    }
  }
  return spec;
}

// ---- systemd -----------------------------------------------------------------------------------

export type UnitFile = Map<string, [string, string][]>;

/** A unit file's sections and their settings in order (continuation lines joined). */
export function parseUnit(text: string): UnitFile {
  const unit: UnitFile = new Map();
  let section: [string, string][] | undefined;
  for (const raw of text.replace(/\\\n/g, ' ').split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      section = [];
      unit.set(header[1]!, section);
      continue;
    }
    const eq = line.indexOf('=');
    if (!section || eq < 0) throw new Error(`unit file: unexpected line ${JSON.stringify(line)}`);
    section.push([line.slice(0, eq).trim(), line.slice(eq + 1).trim()]);
  }
  return unit;
}

export function unitSettings(unit: UnitFile, section: string, key: string): string[] {
  return (unit.get(section) ?? []).filter(([k]) => k === key).map(([, v]) => v);
}

/** systemd's word splitting of ExecStart= and Environment=: whitespace, "double" and 'single' quotes. */
export function splitWords(text: string): string[] {
  const words: string[] = [];
  for (const m of text.matchAll(/"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+)/g)) {
    words.push(m[1] !== undefined ? m[1].replace(/\\(.)/g, '$1') : (m[2] ?? m[3]!));
  }
  return words;
}

/** The command line of ExecStart= (one command; its prefixes @-:+! are not used by our unit). */
export function execStart(unit: UnitFile): string[] {
  const values = unitSettings(unit, 'Service', 'ExecStart');
  if (values.length !== 1) throw new Error(`expected one ExecStart=, found ${values.length}`);
  const words = splitWords(values[0]!);
  if (/^[@\-:+!]/.test(words[0] ?? '')) throw new Error('ExecStart prefixes are not handled here');
  if (words.some((w) => /\$|%/.test(w)))
    throw new Error('ExecStart with $VARIABLES or %specifiers is not handled here');
  return words;
}

/** An EnvironmentFile= as systemd reads it: KEY=VALUE lines, # and ; comments, optional quotes. */
export function parseEnvironmentFile(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const raw of text.replace(/\\\n/g, '').split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const m = /^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$/.exec(line);
    if (!m) throw new Error(`environment file: not KEY=VALUE: ${JSON.stringify(line)}`);
    const quoted = /^"((?:[^"\\]|\\.)*)"$|^'([^']*)'$/.exec(m[2]!);
    env[m[1]!] = quoted ? (quoted[1] !== undefined ? quoted[1].replace(/\\(.)/g, '$1') : quoted[2]!) : m[2]!;
  }
  return env;
}

/**
 * The environment the unit gives the process: Environment= settings, then the EnvironmentFile=
 * files (which override them), read from where the unit expects them via `locate`.
 */
export function unitEnvironment(unit: UnitFile, locate: (file: string) => string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const setting of unitSettings(unit, 'Service', 'Environment')) {
    for (const word of splitWords(setting)) {
      const eq = word.indexOf('=');
      if (eq < 0) throw new Error(`Environment=: not KEY=VALUE: ${word}`);
      env[word.slice(0, eq)] = word.slice(eq + 1);
    }
  }
  for (const file of unitSettings(unit, 'Service', 'EnvironmentFile')) {
    const optional = file.startsWith('-');
    const where = locate(file.replace(/^-/, ''));
    if (optional && !fs.existsSync(where)) continue;
    Object.assign(env, parseEnvironmentFile(fs.readFileSync(where, 'utf8')));
  }
  return env;
}

// ---- the proxy's view ----------------------------------------------------------------------------

const OPTION_ENV = new Map(OPTIONS.map((o) => [envName(o.name), o.name]));

/** KOP_* variables that are no option of proxy/config.ts (the proxy would ignore, or refuse, them). */
export function unknownOptionVariables(env: Record<string, string>): string[] {
  return Object.keys(env).filter((k) => k.startsWith('KOP_') && !OPTION_ENV.has(k));
}

/** Flags that are no option of proxy/config.ts. */
export function unknownFlags(args: string[]): string[] {
  const names = new Set(OPTIONS.map((o) => o.name));
  return args
    .filter((a) => a.startsWith('--'))
    .map((a) => a.slice(2).split('=')[0]!)
    .filter((n) => !names.has(n));
}

/** The configuration the proxy builds from this command line and environment (throws ConfigError). */
export function proxyConfig(args: string[], env: Record<string, string>): ProxyConfig {
  return loadConfig(args, env);
}

/** The port the proxy serves broker `nodeId` on, by the proxy's own rule (proxy/core/broker-map.ts). */
export function brokerPort(config: ProxyConfig, nodeId: number): number {
  return new BrokerMap(config.listen.port, config.brokerPorts).localPort(nodeId);
}

/** brokers.nodeIds and brokers.nodeIdRange of a values file, as the chart reads them. */
export function valuesNodeIds(valuesFile: string): number[] {
  const values = (parseYaml(fs.readFileSync(valuesFile, 'utf8')) ?? {}) as any;
  const ids: number[] = [...((values.brokers?.nodeIds ?? []) as number[])].map(Number);
  const range = values.brokers?.nodeIdRange;
  if (range && Object.keys(range).length > 0) {
    for (let id = Number(range.first); id <= Number(range.last); id++) ids.push(id);
  }
  return [...new Set(ids)];
}

export function readValues(valuesFile: string): any {
  return parseYaml(fs.readFileSync(valuesFile, 'utf8')) ?? {};
}
/* eslint-enable @typescript-eslint/no-explicit-any */
