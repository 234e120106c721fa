/**
 * Test-only: fast-check arbitraries for any message of any version, built by walking the parsed spec
 * model (not the generated code), so the generated codecs are checked against the spec itself.
 */
import fc from 'fast-check';
import { inRange, isEmpty, parseIntDefault } from '../generator/spec-model.js';
import type { FieldSpec, FieldType, MessageSpec, StructSpec } from '../generator/spec-model.js';

const ZERO_UUID = Buffer.alloc(16).toString('base64url');

/** The value a decoder must produce for a field absent from the version (its spec default). */
export function specDefault(msg: MessageSpec, f: FieldSpec): unknown {
  const d = f.default;
  if (d === 'null') return null;
  const t = f.type;
  if (t.kind === 'array') return [];
  if (t.kind === 'struct') return structDefault(msg, msg.structs.get(t.name)!);
  switch (t.name) {
    case 'bool':
      return d === true || d === 'true';
    case 'int64':
      return d === undefined ? 0n : parseIntDefault(d as string | number, f.name);
    case 'float64':
      return d === undefined ? 0 : Number(d);
    case 'string':
      return d === undefined ? '' : String(d);
    case 'uuid':
      return ZERO_UUID;
    case 'bytes':
      return Buffer.alloc(0);
    case 'records':
      return null;
    default:
      return d === undefined ? 0 : Number(parseIntDefault(d as string | number, f.name));
  }
}

function structDefault(msg: MessageSpec, s: StructSpec): Record<string, unknown> {
  const o: Record<string, unknown> = {};
  for (const f of s.fields) o[f.property] = specDefault(msg, f);
  return o;
}

const str = fc.oneof(fc.string({ maxLength: 8 }), fc.string({ unit: 'binary', maxLength: 4 }));
const buf = fc.uint8Array({ maxLength: 8 }).map((a) => Buffer.from(a));

function primitiveArb(name: string, nullable: boolean): fc.Arbitrary<unknown> {
  let a: fc.Arbitrary<unknown>;
  switch (name) {
    case 'bool':
      a = fc.boolean();
      break;
    case 'int8':
      a = fc.integer({ min: -128, max: 127 });
      break;
    case 'int16':
      a = fc.integer({ min: -32768, max: 32767 });
      break;
    case 'uint16':
      a = fc.integer({ min: 0, max: 65535 });
      break;
    case 'int32':
      a = fc.integer();
      break;
    case 'uint32':
      a = fc.integer({ min: 0, max: 4294967295 });
      break;
    case 'int64':
      a = fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n });
      break;
    case 'float64':
      a = fc.double();
      break;
    case 'string':
      a = str;
      break;
    case 'uuid':
      a = fc.uint8Array({ minLength: 16, maxLength: 16 }).map((b) => Buffer.from(b).toString('base64url'));
      break;
    case 'bytes':
    case 'records':
      a = buf;
      break;
    default:
      throw new Error(`no arbitrary for ${name}`);
  }
  return nullable ? fc.option(a, { nil: null, freq: 4 }) : a;
}

export interface ArbitraryOptions {
  /** Longest generated array. */
  maxArray?: number;
  /** Whether to add unknown tagged fields to flexible structs. */
  unknownTags?: boolean;
}

export function messageArbitrary(
  msg: MessageSpec,
  version: number,
  opts: ArbitraryOptions = {},
): fc.Arbitrary<Record<string, unknown>> {
  const maxArray = opts.maxArray ?? 3;
  const unknownTags = opts.unknownTags ?? true;
  const flexible = inRange(msg.flexibleVersions, version);

  const typeArb = (t: FieldType, nullable: boolean, depth: number): fc.Arbitrary<unknown> => {
    if (t.kind === 'primitive') return primitiveArb(t.name, nullable);
    if (t.kind === 'struct') {
      const s = structArb(msg.structs.get(t.name)!, depth + 1);
      return nullable ? fc.option(s, { nil: null, freq: 4 }) : s;
    }
    const arr = fc.array(typeArb(t.element, false, depth + 1), { maxLength: depth > 4 ? 1 : maxArray });
    return nullable ? fc.option(arr, { nil: null, freq: 4 }) : arr;
  };

  const structArb = (s: StructSpec, depth: number): fc.Arbitrary<Record<string, unknown>> => {
    const parts: Record<string, fc.Arbitrary<unknown>> = {};
    for (const f of s.fields) {
      if (!inRange(f.versions, version)) {
        parts[f.property] = fc.constant(specDefault(msg, f));
        continue;
      }
      const nullable = inRange(f.nullableVersions, version);
      parts[f.property] = typeArb(f.type, nullable, depth);
    }
    const record = fc.record(parts);
    if (!flexible || !unknownTags) return record;
    // Unknown tags: never a tag this struct knows in any version, sorted and unique as Kafka writes them.
    const known = new Set(s.fields.filter((f) => !isEmpty(f.taggedVersions)).map((f) => f.tag!));
    const tag = fc.integer({ min: 0, max: 300 }).filter((t) => !known.has(t));
    const unknown = fc
      .uniqueArray(fc.record({ tag, data: buf }), { selector: (u) => u.tag, maxLength: 2 })
      .map((us) => us.sort((a, b) => a.tag - b.tag));
    return fc.tuple(record, unknown).map(([r, u]) => {
      if (u.length > 0) r['_unknownTaggedFields'] = u;
      return r;
    });
  };

  return structArb(msg.root, 0);
}

/** Every version of a message, as a list (validVersions is a closed range). */
export function versionsOf(msg: MessageSpec): number[] {
  const out: number[] = [];
  for (let v = msg.validVersions.min; v <= msg.validVersions.max; v++) out.push(v);
  return out;
}
