/**
 * Parses Kafka's JSON message specs (JSON with `//` comments) into a checked model. Every key and
 * type must be one this codec understands: anything else throws, so a newer spec that adds a
 * concept we do not implement fails the build instead of being misread silently.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

export interface VersionRange {
  /** Inclusive bounds; an empty range ("none") has min > max. */
  min: number;
  max: number;
}

export const NO_VERSIONS: VersionRange = { min: 1, max: 0 };
export const MAX_VERSION = 0x7fff;

export type PrimitiveName =
  | 'bool'
  | 'int8'
  | 'int16'
  | 'uint16'
  | 'int32'
  | 'uint32'
  | 'int64'
  | 'float64'
  | 'string'
  | 'uuid'
  | 'bytes'
  | 'records';

export type FieldType =
  | { kind: 'primitive'; name: PrimitiveName }
  | { kind: 'array'; element: FieldType }
  | { kind: 'struct'; name: string };

export interface FieldSpec {
  name: string;
  /** The TypeScript property name: the spec name with its first letter lower-cased. */
  property: string;
  type: FieldType;
  versions: VersionRange;
  nullableVersions: VersionRange;
  taggedVersions: VersionRange;
  tag: number | undefined;
  ignorable: boolean;
  /** The raw `default` from the spec, if any (checked against the type). */
  default: string | number | boolean | undefined;
  /** Field-level override of the message's flexible versions (only `ClientId` in RequestHeader). */
  flexibleVersions: VersionRange | undefined;
  mapKey: boolean;
  entityType: string | undefined;
  about: string | undefined;
  zeroCopy: boolean;
}

export interface StructSpec {
  name: string;
  versions: VersionRange;
  fields: FieldSpec[];
}

export interface MessageSpec {
  file: string;
  name: string;
  type: 'request' | 'response' | 'header' | 'data' | 'metadata';
  apiKey: number | undefined;
  validVersions: VersionRange;
  flexibleVersions: VersionRange;
  deprecatedVersions: VersionRange;
  latestVersionUnstable: boolean;
  listeners: string[];
  /** The top-level struct (named like the message). */
  root: StructSpec;
  /** Every named struct of the message: inline ones and commonStructs. */
  structs: Map<string, StructSpec>;
}

const MESSAGE_KEYS = new Set([
  'apiKey',
  'type',
  'listeners',
  'name',
  'validVersions',
  'flexibleVersions',
  'fields',
  'latestVersionUnstable',
  'commonStructs',
  'deprecatedVersions',
]);
const FIELD_KEYS = new Set([
  'name',
  'type',
  'versions',
  'nullableVersions',
  'taggedVersions',
  'tag',
  'ignorable',
  'default',
  'flexibleVersions',
  'mapKey',
  'entityType',
  'about',
  'zeroCopy',
  'fields',
]);
const COMMON_STRUCT_KEYS = new Set(['name', 'versions', 'fields']);
/** Primitives of one fixed width, whose reader and writer methods are named after them. */
export const FIXED_WIDTH_PRIMITIVES: ReadonlySet<string> = new Set([
  'bool',
  'int8',
  'int16',
  'uint16',
  'int32',
  'uint32',
  'int64',
  'float64',
  'uuid',
]);
const PRIMITIVES = new Set<string>([...FIXED_WIDTH_PRIMITIVES, 'string', 'bytes', 'records']);
const INT_RANGES: Record<string, [number, number]> = {
  int8: [-128, 127],
  int16: [-32768, 32767],
  uint16: [0, 65535],
  int32: [-2147483648, 2147483647],
  uint32: [0, 4294967295],
};
const NAME_RE = /^[A-Z][A-Za-z0-9]*$/;

export class SpecError extends Error {
  override name = 'SpecError';
}

/** Removes `//` comments outside string literals (Kafka specs are JSON with line comments). */
export function stripComments(text: string): string {
  let out = '';
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (inString) {
      out += c;
      if (c === '\\') out += text[++i] ?? '';
      else if (c === '"') inString = false;
    } else if (c === '"') {
      inString = true;
      out += c;
    } else if (c === '/' && text[i + 1] === '/') {
      while (i < text.length && text[i] !== '\n') i++;
      out += '\n';
    } else {
      out += c;
    }
  }
  return out;
}

export function parseVersions(text: unknown, where: string): VersionRange {
  if (typeof text !== 'string')
    throw new SpecError(`${where}: version range must be a string, got ${String(text)}`);
  if (text === 'none') return NO_VERSIONS;
  let m = /^(\d+)\+$/.exec(text);
  if (m) return { min: Number(m[1]), max: MAX_VERSION };
  m = /^(\d+)-(\d+)$/.exec(text);
  if (m) {
    const r = { min: Number(m[1]), max: Number(m[2]) };
    if (r.min > r.max) throw new SpecError(`${where}: empty version range "${text}"`);
    return r;
  }
  m = /^(\d+)$/.exec(text);
  if (m) return { min: Number(m[1]), max: Number(m[1]) };
  throw new SpecError(`${where}: cannot parse version range "${text}"`);
}

export function isEmpty(r: VersionRange): boolean {
  return r.min > r.max;
}

export function intersect(a: VersionRange, b: VersionRange): VersionRange {
  const r = { min: Math.max(a.min, b.min), max: Math.min(a.max, b.max) };
  return isEmpty(r) ? NO_VERSIONS : r;
}

export function contains(outer: VersionRange, inner: VersionRange): boolean {
  return isEmpty(inner) || (outer.min <= inner.min && inner.max <= outer.max);
}

export function inRange(r: VersionRange, v: number): boolean {
  return v >= r.min && v <= r.max;
}

function parseType(text: unknown, where: string): FieldType {
  if (typeof text !== 'string') throw new SpecError(`${where}: type must be a string`);
  if (text.startsWith('[]')) {
    const element = parseType(text.slice(2), where);
    if (element.kind === 'array') throw new SpecError(`${where}: nested arrays are not supported`);
    return { kind: 'array', element };
  }
  if (PRIMITIVES.has(text)) return { kind: 'primitive', name: text as PrimitiveName };
  if (NAME_RE.test(text)) return { kind: 'struct', name: text };
  throw new SpecError(`${where}: unknown type "${text}"`);
}

function checkKeys(obj: Record<string, unknown>, allowed: Set<string>, where: string): void {
  for (const k of Object.keys(obj)) {
    if (!allowed.has(k)) throw new SpecError(`${where}: unknown spec key "${k}"`);
  }
}

function bool(v: unknown, where: string): boolean {
  if (v === undefined) return false;
  if (typeof v !== 'boolean') throw new SpecError(`${where}: expected a boolean, got ${JSON.stringify(v)}`);
  return v;
}

function optString(v: unknown, where: string): string | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw new SpecError(`${where}: expected a string, got ${JSON.stringify(v)}`);
  return v;
}

/** Parses an integer default the way Kafka's generator does: decimal or 0x-hex, as string or number. */
export function parseIntDefault(v: string | number, where: string): bigint {
  const s = String(v).trim();
  const m = /^(-?)(0x[0-9a-fA-F]+|\d+)$/.exec(s);
  if (!m) throw new SpecError(`${where}: bad integer default ${JSON.stringify(v)}`);
  const abs = BigInt(m[2]!);
  return m[1] === '-' ? -abs : abs;
}

function checkDefault(f: FieldSpec, where: string): void {
  const d = f.default;
  if (d === undefined) return;
  if (typeof d !== 'string' && typeof d !== 'number' && typeof d !== 'boolean') {
    throw new SpecError(`${where}: unsupported default ${JSON.stringify(d)}`);
  }
  if (d === 'null') {
    if (isEmpty(f.nullableVersions)) throw new SpecError(`${where}: default null on a non-nullable field`);
    return;
  }
  const t = f.type;
  if (t.kind !== 'primitive')
    throw new SpecError(`${where}: only "null" is a valid default for ${t.kind} fields`);
  switch (t.name) {
    case 'bool':
      if (d !== true && d !== false && d !== 'true' && d !== 'false') {
        throw new SpecError(`${where}: bad bool default ${JSON.stringify(d)}`);
      }
      return;
    case 'int8':
    case 'int16':
    case 'uint16':
    case 'int32':
    case 'uint32': {
      const n = parseIntDefault(d as string | number, where);
      const [lo, hi] = INT_RANGES[t.name]!;
      if (n < BigInt(lo) || n > BigInt(hi))
        throw new SpecError(`${where}: default ${d} out of ${t.name} range`);
      return;
    }
    case 'int64': {
      const n = parseIntDefault(d as string | number, where);
      if (BigInt.asIntN(64, n) !== n) throw new SpecError(`${where}: default ${d} out of int64 range`);
      return;
    }
    case 'float64':
      if (Number.isNaN(Number(d))) throw new SpecError(`${where}: bad float64 default ${JSON.stringify(d)}`);
      return;
    case 'string':
      if (typeof d !== 'string') throw new SpecError(`${where}: string default must be a string`);
      return;
    default:
      throw new SpecError(`${where}: a ${t.name} field cannot have default ${JSON.stringify(d)}`);
  }
}

interface ParseContext {
  file: string;
  structs: Map<string, StructSpec>;
  flexibleVersions: VersionRange;
}

function parseFields(raw: unknown, ctx: ParseContext, where: string): FieldSpec[] {
  if (!Array.isArray(raw)) throw new SpecError(`${where}: "fields" must be an array`);
  const fields = raw.map((r: unknown, i: number) => parseField(r, ctx, `${where}.fields[${i}]`));
  const names = new Set<string>();
  const tags = new Set<number>();
  for (const f of fields) {
    if (names.has(f.property)) throw new SpecError(`${where}: duplicate field ${f.name}`);
    names.add(f.property);
    if (f.tag !== undefined) {
      if (tags.has(f.tag)) throw new SpecError(`${where}: duplicate tag ${f.tag}`);
      tags.add(f.tag);
    }
  }
  return fields;
}

function parseField(raw: unknown, ctx: ParseContext, whereIn: string): FieldSpec {
  if (typeof raw !== 'object' || raw === null) throw new SpecError(`${whereIn}: field must be an object`);
  const o = raw as Record<string, unknown>;
  const name = optString(o['name'], whereIn);
  // Field names are PascalCase except a few (CreateTopicsRequest has "timeoutMs").
  if (name === undefined || !/^[A-Za-z][A-Za-z0-9]*$/.test(name)) {
    throw new SpecError(`${whereIn}: bad field name ${String(name)}`);
  }
  const where = `${whereIn}(${name})`;
  checkKeys(o, FIELD_KEYS, where);
  const type = parseType(o['type'], where);
  const versions = parseVersions(o['versions'], `${where}.versions`);
  const nullableVersions =
    o['nullableVersions'] === undefined
      ? NO_VERSIONS
      : parseVersions(o['nullableVersions'], `${where}.nullableVersions`);
  const taggedVersions =
    o['taggedVersions'] === undefined
      ? NO_VERSIONS
      : parseVersions(o['taggedVersions'], `${where}.taggedVersions`);
  // Kafka's specs write tags both as numbers and as strings ("tag": "0").
  const rawTag = o['tag'];
  const tag = typeof rawTag === 'string' && /^\d+$/.test(rawTag) ? Number(rawTag) : rawTag;
  if (tag !== undefined && (typeof tag !== 'number' || !Number.isInteger(tag) || tag < 0)) {
    throw new SpecError(`${where}: bad tag ${JSON.stringify(rawTag)}`);
  }
  if ((tag === undefined) !== isEmpty(taggedVersions)) {
    throw new SpecError(`${where}: "tag" and "taggedVersions" must be given together`);
  }
  if (!contains(versions, taggedVersions)) throw new SpecError(`${where}: taggedVersions outside versions`);
  if (!contains(ctx.flexibleVersions, taggedVersions)) {
    throw new SpecError(`${where}: taggedVersions outside the message's flexibleVersions`);
  }
  const elementOrSelf = type.kind === 'array' ? type.element : type;
  if (!isEmpty(nullableVersions)) {
    const nullableKinds = type.kind === 'array' || type.kind === 'struct' || elementOrSelf.kind === 'struct';
    const nullablePrims = ['string', 'bytes', 'records'];
    if (!nullableKinds && !(type.kind === 'primitive' && nullablePrims.includes(type.name))) {
      throw new SpecError(`${where}: a ${String(o['type'])} field cannot be nullable`);
    }
  }
  const flexibleVersions =
    o['flexibleVersions'] === undefined
      ? undefined
      : parseVersions(o['flexibleVersions'], `${where}.flexibleVersions`);
  if (
    flexibleVersions !== undefined &&
    !(type.kind === 'primitive' && ['string', 'bytes'].includes(type.name))
  ) {
    throw new SpecError(`${where}: field-level flexibleVersions only applies to string and bytes fields`);
  }
  const zeroCopy = bool(o['zeroCopy'], `${where}.zeroCopy`);
  if (zeroCopy && !(type.kind === 'primitive' && type.name === 'bytes')) {
    throw new SpecError(`${where}: zeroCopy only applies to bytes fields`);
  }
  const f: FieldSpec = {
    name,
    property: name[0]!.toLowerCase() + name.slice(1),
    type,
    versions,
    nullableVersions,
    taggedVersions,
    tag: tag as number | undefined,
    ignorable: bool(o['ignorable'], `${where}.ignorable`),
    default: o['default'] as FieldSpec['default'],
    flexibleVersions,
    mapKey: bool(o['mapKey'], `${where}.mapKey`),
    entityType: optString(o['entityType'], `${where}.entityType`),
    about: optString(o['about'], `${where}.about`),
    zeroCopy,
  };
  checkDefault(f, where);
  if (o['fields'] !== undefined) {
    if (elementOrSelf.kind !== 'struct') throw new SpecError(`${where}: only struct types can have "fields"`);
    if (ctx.structs.has(elementOrSelf.name)) {
      throw new SpecError(`${where}: struct ${elementOrSelf.name} is defined twice`);
    }
    // Reserve the name first so a struct cannot contain itself.
    const struct: StructSpec = { name: elementOrSelf.name, versions, fields: [] };
    ctx.structs.set(struct.name, struct);
    struct.fields = parseFields(o['fields'], ctx, where);
  }
  return f;
}

export function parseMessageSpec(text: string, file: string): MessageSpec {
  let json: unknown;
  try {
    json = JSON.parse(stripComments(text));
  } catch (e) {
    throw new SpecError(`${file}: invalid JSON: ${(e as Error).message}`);
  }
  if (typeof json !== 'object' || json === null) throw new SpecError(`${file}: not an object`);
  const o = json as Record<string, unknown>;
  checkKeys(o, MESSAGE_KEYS, file);
  const name = optString(o['name'], `${file}.name`);
  if (name === undefined || !NAME_RE.test(name)) throw new SpecError(`${file}: bad message name`);
  const type = o['type'];
  if (
    type !== 'request' &&
    type !== 'response' &&
    type !== 'header' &&
    type !== 'data' &&
    type !== 'metadata'
  ) {
    throw new SpecError(`${file}: unknown message type ${JSON.stringify(type)}`);
  }
  const apiKey = o['apiKey'];
  if (apiKey !== undefined && (typeof apiKey !== 'number' || !Number.isInteger(apiKey) || apiKey < 0)) {
    throw new SpecError(`${file}: bad apiKey`);
  }
  if ((type === 'request' || type === 'response') && apiKey === undefined) {
    throw new SpecError(`${file}: ${type} without apiKey`);
  }
  const listeners = o['listeners'];
  if (
    listeners !== undefined &&
    !(Array.isArray(listeners) && listeners.every((l) => typeof l === 'string'))
  ) {
    throw new SpecError(`${file}: "listeners" must be an array of strings`);
  }
  const validVersions = parseVersions(o['validVersions'], `${file}.validVersions`);
  // An API Kafka removed keeps its spec with `"validVersions": "none"` and nothing else.
  const removed = isEmpty(validVersions);
  const flexibleVersions =
    removed && o['flexibleVersions'] === undefined
      ? NO_VERSIONS
      : parseVersions(o['flexibleVersions'], `${file}.flexibleVersions`);
  const deprecatedVersions =
    o['deprecatedVersions'] === undefined
      ? NO_VERSIONS
      : parseVersions(o['deprecatedVersions'], `${file}.deprecated`);
  const ctx: ParseContext = { file, structs: new Map(), flexibleVersions };
  const root: StructSpec = { name, versions: validVersions, fields: [] };
  ctx.structs.set(name, root);
  // commonStructs first: inline fields may refer to them.
  const common = o['commonStructs'];
  if (common !== undefined) {
    if (!Array.isArray(common)) throw new SpecError(`${file}: commonStructs must be an array`);
    common.forEach((c: unknown, i: number) => {
      const where = `${file}.commonStructs[${i}]`;
      if (typeof c !== 'object' || c === null) throw new SpecError(`${where}: must be an object`);
      const co = c as Record<string, unknown>;
      checkKeys(co, COMMON_STRUCT_KEYS, where);
      const sname = optString(co['name'], where);
      if (sname === undefined || !NAME_RE.test(sname)) throw new SpecError(`${where}: bad name`);
      if (ctx.structs.has(sname)) throw new SpecError(`${where}: struct ${sname} defined twice`);
      const struct: StructSpec = {
        name: sname,
        versions: parseVersions(co['versions'], `${where}.versions`),
        fields: [],
      };
      ctx.structs.set(sname, struct);
      struct.fields = parseFields(co['fields'], ctx, `${where}(${sname})`);
    });
  }
  root.fields = removed && o['fields'] === undefined ? [] : parseFields(o['fields'], ctx, file);
  // Every struct-typed field must name a struct defined somewhere in this message.
  for (const s of ctx.structs.values()) {
    for (const f of s.fields) {
      const t = f.type.kind === 'array' ? f.type.element : f.type;
      if (t.kind === 'struct' && !ctx.structs.has(t.name)) {
        throw new SpecError(`${file}: field ${s.name}.${f.name} refers to unknown struct ${t.name}`);
      }
      if (t.kind === 'struct' && t.name === name)
        throw new SpecError(`${file}: ${f.name} refers to the root struct`);
    }
  }
  return {
    file,
    name,
    type,
    apiKey: apiKey as number | undefined,
    validVersions,
    flexibleVersions,
    deprecatedVersions,
    latestVersionUnstable: bool(o['latestVersionUnstable'], `${file}.latestVersionUnstable`),
    listeners: (listeners as string[] | undefined) ?? [],
    root,
    structs: ctx.structs,
  };
}

/**
 * A request or response spec of an API Kafka still has: the codec is generated for these. A removed
 * API keeps its spec with `"validVersions": "none"`; its frames pass through like an unknown key's.
 */
export function hasCodec(spec: MessageSpec): boolean {
  return (spec.type === 'request' || spec.type === 'response') && !isEmpty(spec.validVersions);
}

/** Parses every `*.json` spec in a directory, sorted by file name. */
export function loadSpecs(dir: string): MessageSpec[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => parseMessageSpec(readFileSync(join(dir, f), 'utf8'), f));
}
