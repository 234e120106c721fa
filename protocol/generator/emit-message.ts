/**
 * Emits one TypeScript module per request/response spec: interfaces for the message and its
 * structs, and read/write/sizeOf functions covering every version with `version >= N` branches.
 * Version conditions are simplified against the versions a struct can actually be used in, so a
 * field present in all of them costs no branch at run time.
 */
import type { Cond } from './emit-code.js';
import {
  and,
  cond,
  ifElse,
  indent,
  pick,
  readPrimitive,
  sizePrimitive,
  tsString,
  writePrimitive,
} from './emit-code.js';
import { SpecError, contains, intersect, isEmpty, parseIntDefault } from './spec-model.js';
import type { FieldSpec, FieldType, MessageSpec, StructSpec, VersionRange } from './spec-model.js';

const RESERVED = new Set([
  'Reader',
  'Writer',
  'TaggedField',
  'ProtocolError',
  'Buffer',
  'Array',
  'Object',
  'Number',
  'String',
  'Boolean',
  'BigInt',
  'Error',
  'Map',
  'Set',
  'Promise',
]);

interface FieldContext {
  struct: StructSpec;
  f: FieldSpec;
  /** Versions in which the field is on the wire (within the struct's usable versions). */
  present: Cond;
  /** Versions in which the field is a tagged field. */
  tagged: boolean;
  /** Within `present`: nullable and flexible conditions. */
  nullable: Cond;
  flexible: Cond;
}

export class MessageEmitter {
  private readonly msg: MessageSpec;
  private readonly imports = new Set<string>();
  private readonly supportImports = new Set<string>();
  private readonly writerImports = new Set<string>();
  /** Notes a function of generated-support.ts that the emitted code calls. */
  private readonly needSupport = (name: string): void => void this.supportImports.add(name);

  constructor(msg: MessageSpec) {
    this.msg = msg;
    for (const name of msg.structs.keys()) {
      if (RESERVED.has(name))
        throw new SpecError(`${msg.file}: struct name ${name} collides with a codec name`);
    }
  }

  /** Versions in which a struct can be used at all. */
  private usable(s: StructSpec): VersionRange {
    return intersect(s.versions, this.msg.validVersions);
  }

  private structFlexible(s: StructSpec): Cond {
    return cond(this.msg.flexibleVersions, this.usable(s));
  }

  private fieldContext(s: StructSpec, f: FieldSpec): FieldContext {
    const usable = this.usable(s);
    const present = cond(f.versions, usable);
    const within = intersect(f.versions, usable);
    let tagged = false;
    if (!isEmpty(intersect(f.taggedVersions, within))) {
      // Kafka's specs only tag a field in all of its versions; mixing is not something we implement.
      if (!contains(f.taggedVersions, within)) {
        throw new SpecError(`${this.msg.file}: ${s.name}.${f.name} is tagged in only some of its versions`);
      }
      tagged = true;
    }
    let flexRange = this.msg.flexibleVersions;
    if (f.flexibleVersions !== undefined) flexRange = intersect(flexRange, f.flexibleVersions);
    return {
      struct: s,
      f,
      present,
      tagged,
      nullable: cond(f.nullableVersions, within),
      flexible: cond(flexRange, within),
    };
  }

  // ---- types and defaults ----

  private tsType(t: FieldType): string {
    switch (t.kind) {
      case 'array':
        return `${this.tsType(t.element)}[]`;
      case 'struct':
        return t.name;
      case 'primitive':
        switch (t.name) {
          case 'bool':
            return 'boolean';
          case 'int64':
            return 'bigint';
          case 'string':
          case 'uuid':
            return 'string';
          case 'bytes':
            return 'Buffer';
          case 'records':
            return 'Buffer | null';
          default:
            return 'number';
        }
    }
  }

  private fieldTsType(f: FieldSpec): string {
    const base = this.tsType(f.type);
    if (isEmpty(f.nullableVersions) || base.endsWith('| null')) return base;
    return `${base} | null`;
  }

  private defaultExpr(f: FieldSpec): string {
    const d = f.default;
    const t = f.type;
    if (d === 'null') return 'null';
    if (t.kind === 'array') return '[]';
    if (t.kind === 'struct') return `default${t.name}()`;
    switch (t.name) {
      case 'bool':
        return d === true || d === 'true' ? 'true' : 'false';
      case 'int8':
      case 'int16':
      case 'uint16':
      case 'int32':
      case 'uint32':
        return d === undefined ? '0' : String(parseIntDefault(d as string | number, f.name));
      case 'int64':
        return d === undefined ? '0n' : `${parseIntDefault(d as string | number, f.name)}n`;
      case 'float64':
        return d === undefined ? '0' : String(Number(d));
      case 'string':
        return tsString(d === undefined ? '' : String(d));
      case 'uuid':
        this.supportImports.add('ZERO_UUID');
        return 'ZERO_UUID';
      case 'bytes':
        this.supportImports.add('EMPTY_BUFFER');
        return 'EMPTY_BUFFER';
      case 'records':
        return 'null';
    }
  }

  /** A boolean expression: is `v` equal to the field's default (so it need not be written)? */
  private isDefaultExpr(f: FieldSpec, v: string): string {
    const d = this.defaultExpr(f);
    const t = f.type;
    if (d === 'null') return `${v} === null`;
    if (t.kind === 'array') return `${v} !== null && ${v}.length === 0`;
    if (t.kind === 'struct') return `${v} !== null && isDefault${t.name}(${v})`;
    if (t.name === 'bytes') return `${v} !== null && ${v}.length === 0`;
    return `${v} === ${d}`;
  }

  // ---- decode ----

  /** Statements that read one field's value from reader `r` into the existing variable `target`. */
  private readInto(fc: FieldContext, r: string, target: string): string[] {
    const t = fc.f.type;
    if (t.kind === 'primitive') return [`${target} = ${readPrimitive(t.name, r, fc.nullable, fc.flexible)};`];
    if (t.kind === 'struct') {
      const read = `read${t.name}(${r}, version)`;
      return [`${target} = ${pick(fc.nullable, `(${r}.int8() < 0 ? null : ${read})`, read)};`];
    }
    const el = t.element;
    const elRead =
      el.kind === 'struct'
        ? `read${el.name}(${r}, version)`
        : readPrimitive((el as { name: string }).name, r, 'false', fc.flexible);
    const len = pick(
      fc.flexible,
      pick(fc.nullable, `${r}.compactNullableArrayLength()`, `${r}.compactArrayLength()`),
      pick(fc.nullable, `${r}.nullableArrayLength()`, `${r}.arrayLength()`),
    );
    // int32 lists (replica and node ids) are common enough for a dedicated Reader loop.
    const loop =
      el.kind === 'primitive' && el.name === 'int32'
        ? [`${target} = ${r}.int32Array(n);`]
        : [
            `const a: ${this.tsType(el)}[] = [];`,
            `for (let i = 0; i < n; i++) a.push(${elRead});`,
            `${target} = a;`,
          ];
    if (fc.nullable === 'false') return ['{', `  const n = ${len};`, ...indent(loop), '}'];
    return [
      '{',
      `  const n = ${len};`,
      `  if (n < 0) {`,
      `    ${target} = null;`,
      '  } else {',
      ...indent(indent(loop)),
      '  }',
      '}',
    ];
  }

  // ---- encode ----

  /** A value expression, narrowed to non-null where the type allows null but this version does not. */
  private valueFor(fc: FieldContext, v: string, nullableInVersion: boolean): string {
    const typeNullable = this.fieldTsType(fc.f).endsWith('| null');
    if (!typeNullable || nullableInVersion) return v;
    this.supportImports.add('notNull');
    return `notNull(${v}, '${fc.struct.name}.${fc.f.name}')`;
  }

  private writeValue(fc: FieldContext, v: string): string[] {
    const t = fc.f.type;
    const both = (fn: (nullable: boolean) => string[]): string[] => ifElse(fc.nullable, fn(true), fn(false));
    if (t.kind === 'primitive') {
      return both((nl) =>
        writePrimitive(t.name, this.valueFor(fc, v, nl), nl ? 'true' : 'false', fc.flexible),
      );
    }
    if (t.kind === 'struct') {
      return both((nl) =>
        nl
          ? [
              `if (${v} === null) {`,
              '  w.int8(-1);',
              '} else {',
              '  w.int8(1);',
              `  write${t.name}(w, ${v}, version);`,
              '}',
            ]
          : [`write${t.name}(w, ${this.valueFor(fc, v, false)}, version);`],
      );
    }
    const el = t.element;
    const elWrite =
      el.kind === 'struct'
        ? [`write${el.name}(w, e, version);`]
        : writePrimitive((el as { name: string }).name, 'e', 'false', fc.flexible);
    const writeLen = ifElse(fc.flexible, ['w.uvarint(a.length + 1);'], ['w.int32(a.length);']);
    const body =
      el.kind === 'primitive' && el.name === 'int32'
        ? [...writeLen, 'w.int32Array(a);']
        : [...writeLen, 'for (const e of a) {', ...indent(elWrite), '}'];
    return both((nl) =>
      nl
        ? [
            '{',
            `  const a = ${v};`,
            '  if (a === null) {',
            ...indent(indent(ifElse(fc.flexible, ['w.uvarint(0);'], ['w.int32(-1);']))),
            '  } else {',
            ...indent(indent(body)),
            '  }',
            '}',
          ]
        : ['{', `  const a = ${this.valueFor(fc, v, false)};`, ...indent(body), '}'],
    );
  }

  // ---- size ----

  /** Statements adding the encoded size of `v` to the variable `acc`. */
  private sizeValue(fc: FieldContext, v: string, acc: string): string[] {
    const t = fc.f.type;
    const both = (fn: (nullable: boolean) => string[]): string[] => ifElse(fc.nullable, fn(true), fn(false));
    if (t.kind === 'primitive') {
      return both((nl) => [
        `${acc} += ${sizePrimitive(t.name, this.valueFor(fc, v, nl), nl ? 'true' : 'false', fc.flexible, this.needSupport)};`,
      ]);
    }
    if (t.kind === 'struct') {
      return both((nl) =>
        nl
          ? [`${acc} += ${v} === null ? 1 : 1 + sizeOf${t.name}(${v}, version);`]
          : [`${acc} += sizeOf${t.name}(${this.valueFor(fc, v, false)}, version);`],
      );
    }
    const el = t.element;
    const fixed =
      el.kind === 'primitive' ? sizePrimitive(el.name, 'e', 'false', fc.flexible, this.needSupport) : '';
    const elems = /^\d+$/.test(fixed)
      ? [`${acc} += a.length * ${fixed};`]
      : [`for (const e of a) ${acc} += ${el.kind === 'struct' ? `sizeOf${el.name}(e, version)` : fixed};`];
    this.writerImports.add('sizeOfUvarint');
    const lenSize = pick(fc.flexible, 'sizeOfUvarint(a.length + 1)', '4');
    const body = [`${acc} += ${lenSize};`, ...elems];
    return both((nl) =>
      nl
        ? [
            '{',
            `  const a = ${v};`,
            '  if (a === null) {',
            `    ${acc} += ${pick(fc.flexible, '1', '4')};`,
            '  } else {',
            ...indent(indent(body)),
            '  }',
            '}',
          ]
        : ['{', `  const a = ${this.valueFor(fc, v, false)};`, ...indent(body), '}'],
    );
  }

  // ---- structs ----

  private local(f: FieldSpec): string {
    return `f_${f.property}`;
  }

  private emitInterface(s: StructSpec): string[] {
    const out: string[] = [];
    const isRoot = s === this.msg.root;
    out.push(
      isRoot
        ? `/** ${s.name}, versions ${this.rangeText(this.msg.validVersions)}. */`
        : `/** Struct ${s.name} (used in versions ${this.rangeText(this.usable(s))}). */`,
    );
    out.push(`export interface ${s.name} {`);
    for (const f of s.fields) {
      const notes = [`versions ${this.rangeText(f.versions)}`];
      if (!isEmpty(f.nullableVersions)) notes.push(`nullable ${this.rangeText(f.nullableVersions)}`);
      if (f.tag !== undefined) notes.push(`tag ${f.tag} in ${this.rangeText(f.taggedVersions)}`);
      if (f.ignorable) notes.push('ignorable');
      if (f.mapKey) notes.push('map key');
      if (f.entityType !== undefined) notes.push(`entity ${f.entityType}`);
      if (f.default !== undefined) notes.push(`default ${JSON.stringify(f.default)}`);
      if (f.zeroCopy) notes.push('zero-copy');
      if (f.type.kind === 'primitive' && f.type.name === 'uuid') notes.push('UUID as 22-char base64url');
      const about = (f.about ?? '').replace(/\*\//g, '* /');
      out.push(`  /** ${about}${about === '' ? '' : ' '}(${notes.join('; ')}) */`);
      out.push(`  ${f.property}: ${this.fieldTsType(f)};`);
    }
    if (this.structFlexible(s) !== 'false') {
      out.push('  /** Tagged fields this codec does not know, kept raw so re-encoding is byte-exact. */');
      out.push('  _unknownTaggedFields?: TaggedField[];');
      this.imports.add('TaggedField');
    }
    out.push('}');
    return out;
  }

  private rangeText(r: VersionRange): string {
    if (isEmpty(r)) return 'none';
    if (r.max >= 0x7fff) return `${r.min}+`;
    return r.min === r.max ? `${r.min}` : `${r.min}-${r.max}`;
  }

  private finishFunction(header: (versionParam: string) => string, body: string[]): string[] {
    const uses = body.some((l) => /\bversion\b/.test(l));
    return [header(uses ? 'version' : '_version'), ...indent(body), '}'];
  }

  private emitDefault(s: StructSpec): string[] {
    const body = [`return {`, ...s.fields.map((f) => `  ${f.property}: ${this.defaultExpr(f)},`), '};'];
    return [`export function default${s.name}(): ${s.name} {`, ...indent(body), '}'];
  }

  private emitIsDefault(s: StructSpec): string[] {
    const terms = s.fields.map((f) => `(${this.isDefaultExpr(f, `m.${f.property}`)})`);
    if (this.structFlexible(s) !== 'false') {
      this.supportImports.add('hasNoUnknownTags');
      terms.push('hasNoUnknownTags(m._unknownTaggedFields)');
    }
    const expr = terms.length === 0 ? 'true' : terms.join(' &&\n    ');
    const param = terms.length === 0 || (terms.length > 0 && !expr.includes('m.')) ? '_m' : 'm';
    return [`export function isDefault${s.name}(${param}: ${s.name}): boolean {`, `  return ${expr};`, '}'];
  }

  private emitRead(s: StructSpec): string[] {
    const body: string[] = [];
    const fcs = s.fields.map((f) => this.fieldContext(s, f));
    const flex = this.structFlexible(s);
    for (const fc of fcs) {
      const local = this.local(fc.f);
      const read = fc.tagged ? [] : this.readInto(fc, 'r', local);
      if (fc.present === 'true' && read.length === 1) {
        // Always on the wire: read straight into a const.
        body.push(`const ${local}: ${this.fieldTsType(fc.f)}${read[0]!.slice(local.length)}`);
        continue;
      }
      if (fc.present === 'true' && !fc.tagged) {
        // Always on the wire but read by several statements: no default value to allocate first.
        body.push(`let ${local}: ${this.fieldTsType(fc.f)};`, ...read);
        continue;
      }
      // A field of no valid version (Kafka keeps some after removing the versions that had them)
      // is never read: it keeps its default.
      const never = fc.present === 'false';
      body.push(
        `${never ? 'const' : 'let'} ${local}: ${this.fieldTsType(fc.f)} = ${this.defaultExpr(fc.f)};`,
      );
      if (!fc.tagged) body.push(...ifElse(fc.present, read, []));
    }
    const taggedFcs = fcs
      .filter((fc) => fc.tagged && fc.present !== 'false')
      .sort((a, b) => a.f.tag! - b.f.tag!);
    if (flex !== 'false') {
      const section: string[] = [];
      if (taggedFcs.length === 0) {
        body.push(`const unknown = ${pick(flex, 'r.rawTaggedFields()', 'undefined')};`);
      } else {
        body.push('let unknown: TaggedField[] | undefined;');
        section.push('const nTags = r.taggedFieldCount();', 'for (let k = 0; k < nTags; k++) {');
        section.push('  const tag = r.uvarint();', '  const size = r.uvarint();');
        let first = true;
        for (const fc of taggedFcs) {
          const c = and(`tag === ${fc.f.tag}`, fc.present);
          section.push(`  ${first ? '' : '} else '}if (${c}) {`);
          section.push('    const t = r.sub(size);');
          section.push(...indent(indent(this.readInto(fc, 't', this.local(fc.f)))));
          section.push('    t.expectEnd();');
          first = false;
        }
        section.push('  } else {', '    (unknown ??= []).push({ tag, data: r.view(size) });', '  }', '}');
      }
      body.push(...ifElse(flex, section, []));
    }
    body.push(`const m: ${s.name} = {`);
    for (const fc of fcs) body.push(`  ${fc.f.property}: ${this.local(fc.f)},`);
    body.push('};');
    if (flex !== 'false') body.push('if (unknown !== undefined) m._unknownTaggedFields = unknown;');
    body.push('return m;');
    return this.finishFunction((v) => `function read${s.name}(r: Reader, ${v}: number): ${s.name} {`, body);
  }

  private absentCheck(fc: FieldContext, v: string): string[] {
    if (fc.f.ignorable) return [];
    this.supportImports.add('unsupportedField');
    return [
      `if (!(${this.isDefaultExpr(fc.f, v)})) throw unsupportedField('${fc.struct.name}', '${fc.f.name}', version);`,
    ];
  }

  private emitWrite(s: StructSpec): string[] {
    const body: string[] = [];
    const fcs = s.fields.map((f) => this.fieldContext(s, f));
    const flex = this.structFlexible(s);
    for (const fc of fcs) {
      const v = `m.${fc.f.property}`;
      if (fc.tagged) {
        // Tagged fields are written in the tagged section; outside their versions they must be default.
        if (fc.present !== 'true') {
          body.push(
            ...ifElse(fc.present === 'false' ? 'true' : `!(${fc.present})`, this.absentCheck(fc, v), []),
          );
        }
        continue;
      }
      body.push(...ifElse(fc.present, this.writeValue(fc, v), this.absentCheck(fc, v)));
    }
    const taggedFcs = fcs
      .filter((fc) => fc.tagged && fc.present !== 'false')
      .sort((a, b) => a.f.tag! - b.f.tag!);
    if (flex !== 'false') {
      const section: string[] = [];
      if (taggedFcs.length === 0) {
        section.push('w.rawTaggedFields(m._unknownTaggedFields);');
      } else {
        this.supportImports.add('writeUnknownTagsBefore');
        section.push('const unknown = m._unknownTaggedFields;');
        section.push('let nTags = unknown === undefined ? 0 : unknown.length;');
        for (const fc of taggedFcs) {
          section.push(
            `const has${fc.f.tag} = ${and(fc.present, `!(${this.isDefaultExpr(fc.f, `m.${fc.f.property}`)})`)};`,
          );
          section.push(`if (has${fc.f.tag}) nTags++;`);
        }
        section.push('w.uvarint(nTags);', 'let u = 0;');
        this.writerImports.add('sizeOfUvarint');
        for (const fc of taggedFcs) {
          const tag = fc.f.tag!;
          section.push(`if (has${tag}) {`);
          section.push(`  u = writeUnknownTagsBefore(w, unknown, u, ${tag});`);
          section.push('  let size = 0;');
          section.push(...indent(this.sizeValue(fc, `m.${fc.f.property}`, 'size')));
          section.push(`  w.uvarint(${tag});`, '  w.uvarint(size);');
          section.push(...indent(this.writeValue(fc, `m.${fc.f.property}`)));
          section.push('}');
        }
        section.push('writeUnknownTagsBefore(w, unknown, u, Infinity);');
      }
      body.push(...ifElse(flex, section, []));
    }
    return this.finishFunction(
      (v) => `function write${s.name}(w: Writer, m: ${s.name}, ${v}: number): void {`,
      body.length === 0 ? ['void m;'] : body,
    );
  }

  private emitSize(s: StructSpec): string[] {
    const body: string[] = ['let n = 0;'];
    const fcs = s.fields.map((f) => this.fieldContext(s, f));
    const flex = this.structFlexible(s);
    for (const fc of fcs) {
      if (fc.tagged) continue;
      body.push(...ifElse(fc.present, this.sizeValue(fc, `m.${fc.f.property}`, 'n'), []));
    }
    const taggedFcs = fcs
      .filter((fc) => fc.tagged && fc.present !== 'false')
      .sort((a, b) => a.f.tag! - b.f.tag!);
    if (flex !== 'false') {
      const section: string[] = [];
      if (taggedFcs.length === 0) {
        this.writerImports.add('sizeOfRawTaggedFields');
        section.push('n += sizeOfRawTaggedFields(m._unknownTaggedFields);');
      } else {
        this.supportImports.add('sizeOfUnknownTags');
        this.writerImports.add('sizeOfUvarint');
        section.push('const unknown = m._unknownTaggedFields;');
        section.push('let nTags = unknown === undefined ? 0 : unknown.length;');
        section.push('n += sizeOfUnknownTags(unknown);');
        for (const fc of taggedFcs) {
          const tag = fc.f.tag!;
          section.push(`if (${and(fc.present, `!(${this.isDefaultExpr(fc.f, `m.${fc.f.property}`)})`)}) {`);
          section.push('  let size = 0;');
          section.push(...indent(this.sizeValue(fc, `m.${fc.f.property}`, 'size')));
          section.push(`  n += sizeOfUvarint(${tag}) + sizeOfUvarint(size) + size;`, '  nTags++;', '}');
        }
        section.push('n += sizeOfUvarint(nTags);');
      }
      body.push(...ifElse(flex, section, []));
    }
    body.push('return n;');
    const usesM = body.some((l) => /\bm\./.test(l));
    // The root's internal size function gets a suffix: the exported sizeOf<Message> wraps it.
    const fname = s === this.msg.root ? `${s.name}Body` : s.name;
    return this.finishFunction(
      (v) => `function sizeOf${fname}(${usesM ? 'm' : '_m'}: ${s.name}, ${v}: number): number {`,
      body,
    );
  }

  emit(): string {
    const msg = this.msg;
    const structs = [...msg.structs.values()];
    const bodyParts: string[][] = [];
    for (const s of structs) bodyParts.push(this.emitInterface(s));
    for (const s of structs) {
      bodyParts.push(this.emitDefault(s));
      bodyParts.push(this.emitIsDefault(s));
      bodyParts.push(this.emitRead(s));
      bodyParts.push(this.emitWrite(s));
      bodyParts.push(this.emitSize(s));
    }
    const name = msg.name;
    const apiKey = msg.apiKey!;
    const { min, max } = msg.validVersions;
    this.supportImports.add('checkVersion');
    bodyParts.push([
      `/** Decodes a ${name} body (no header) of the given version. Throws ProtocolError on malformed input. */`,
      `export function decode${name}(r: Reader, version: number): ${name} {`,
      `  checkVersion(${apiKey}, version, ${min}, ${max});`,
      '  try {',
      `    return read${name}(r, version);`,
      '  } catch (e) {',
      `    throw annotateProtocolError(e, ${apiKey}, version);`,
      '  }',
      '}',
    ]);
    bodyParts.push([
      `/** Encodes a ${name} body (no header) in the given version. */`,
      `export function encode${name}(w: Writer, m: ${name}, version: number): void {`,
      `  checkVersion(${apiKey}, version, ${min}, ${max});`,
      `  write${name}(w, m, version);`,
      '}',
    ]);
    bodyParts.push([
      `/** The exact number of bytes encode${name} writes for this message and version. */`,
      `export function sizeOf${name}(m: ${name}, version: number): number {`,
      `  checkVersion(${apiKey}, version, ${min}, ${max});`,
      `  return sizeOf${name}Body(m, version);`,
      '}',
    ]);
    const text = bodyParts.map((p) => p.join('\n')).join('\n\n');
    const header = [
      `// Generated by protocol/generator from protocol/spec/${msg.file} (Apache Kafka, Apache-2.0).`,
      '// Do not edit: change the generator or the spec and run `npm run generate`.',
      '',
      `import { annotateProtocolError } from '../errors.js';`,
      `import type { Reader${this.imports.has('TaggedField') ? ', TaggedField' : ''} } from '../reader.js';`,
      `import type { Writer } from '../writer.js';`,
    ];
    // Import exactly the helpers the emitted code mentions (branches folded away may drop some).
    const used = (names: Iterable<string>): string[] =>
      [...names].filter((n) => new RegExp(`\\b${n}\\b`).test(text)).sort();
    const writerNames = used(this.writerImports);
    if (writerNames.length > 0) header.push(`import { ${writerNames.join(', ')} } from '../writer.js';`);
    header.push(`import { ${used(this.supportImports).join(', ')} } from '../generated-support.js';`);
    return `${header.join('\n')}\n\n${text}\n`;
  }
}
