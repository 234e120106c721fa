/**
 * Text-level pieces of the codec generator: version conditions simplified into JavaScript
 * expressions, small code-shaping helpers, and the read/write/size code of each primitive type.
 * MessageEmitter (emit-message.ts) builds whole structs from them.
 */
import { FIXED_WIDTH_PRIMITIVES, SpecError, contains, intersect, isEmpty } from './spec-model.js';
import type { VersionRange } from './spec-model.js';

/** A version condition: a constant, or a JavaScript expression over `version`. */
export type Cond = 'true' | 'false' | string;

export function kebabName(name: string): string {
  return name
    .replace(/([a-z0-9])([A-Z])/g, '$1-$2')
    .replace(/([A-Z])([A-Z][a-z])/g, '$1-$2')
    .toLowerCase();
}

export function tsString(s: string): string {
  return `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

export function cond(range: VersionRange, within: VersionRange): Cond {
  const r = intersect(range, within);
  if (isEmpty(r)) return 'false';
  if (contains(r, within)) return 'true';
  const parts: string[] = [];
  if (r.min > within.min) parts.push(`version >= ${r.min}`);
  if (r.max < within.max) parts.push(`version <= ${r.max}`);
  return parts.join(' && ');
}

export function and(a: Cond, b: Cond): Cond {
  if (a === 'false' || b === 'false') return 'false';
  if (a === 'true') return b;
  if (b === 'true') return a;
  return `${a} && ${b}`;
}

export function pick(c: Cond, a: string, b: string): string {
  if (c === 'true') return a;
  if (c === 'false') return b;
  return `(${c} ? ${a} : ${b})`;
}

export function ifElse(c: Cond, a: string[], b: string[]): string[] {
  if (c === 'true') return a;
  if (c === 'false') return b;
  if (a.length === 0 && b.length === 0) return [];
  if (a.length === 0) return [`if (!(${c})) {`, ...indent(b), '}'];
  if (b.length === 0) return [`if (${c}) {`, ...indent(a), '}'];
  return [`if (${c}) {`, ...indent(a), '} else {', ...indent(b), '}'];
}

export function indent(lines: string[]): string[] {
  return lines.map((l) => (l === '' ? l : `  ${l}`));
}

/** The expression that reads one primitive from reader `r`. */
export function readPrimitive(name: string, r: string, nullable: Cond, flexible: Cond): string {
  if (FIXED_WIDTH_PRIMITIVES.has(name)) return `${r}.${name}()`;
  switch (name) {
    case 'string':
      return pick(
        flexible,
        pick(nullable, `${r}.compactNullableString()`, `${r}.compactString()`),
        pick(nullable, `${r}.nullableString()`, `${r}.string()`),
      );
    case 'bytes':
    case 'records':
      return pick(
        flexible,
        pick(nullable, `${r}.compactNullableBytes()`, `${r}.compactBytes()`),
        pick(nullable, `${r}.nullableBytes()`, `${r}.bytes()`),
      );
  }
  throw new SpecError(`unknown primitive ${name}`);
}

/** The statements that write one primitive `v` with writer `w`. */
export function writePrimitive(name: string, v: string, nullable: Cond, flexible: Cond): string[] {
  const call = (m: string): string => `w.${m}(${v});`;
  if (FIXED_WIDTH_PRIMITIVES.has(name)) return [call(name)];
  switch (name) {
    case 'string':
      return ifElse(
        flexible,
        ifElse(nullable, [call('compactNullableString')], [call('compactString')]),
        ifElse(nullable, [call('nullableString')], [call('string')]),
      );
    case 'bytes':
    case 'records':
      return ifElse(
        flexible,
        ifElse(nullable, [call('compactNullableBytes')], [call('compactBytes')]),
        ifElse(nullable, [call('nullableBytes')], [call('bytes')]),
      );
  }
  throw new SpecError(`unknown primitive ${name}`);
}

/**
 * The expression for the encoded size of one primitive `v`; `need` is told each size function
 * of generated-support.ts the expression calls.
 */
export function sizePrimitive(
  name: string,
  v: string,
  nullable: Cond,
  flexible: Cond,
  need: (supportName: string) => void,
): string {
  switch (name) {
    case 'bool':
    case 'int8':
      return '1';
    case 'int16':
    case 'uint16':
      return '2';
    case 'int32':
    case 'uint32':
      return '4';
    case 'int64':
    case 'float64':
      return '8';
    case 'uuid':
      return '16';
  }
  const fn = (n: string): string => {
    need(n);
    return `${n}(${v})`;
  };
  if (name === 'string') {
    return pick(
      flexible,
      pick(nullable, fn('sizeOfCompactNullableString'), fn('sizeOfCompactString')),
      pick(nullable, fn('sizeOfNullableString'), fn('sizeOfString')),
    );
  }
  return pick(
    flexible,
    pick(nullable, fn('sizeOfCompactNullableBytes'), fn('sizeOfCompactBytes')),
    pick(nullable, fn('sizeOfNullableBytes'), fn('sizeOfBytes')),
  );
}
