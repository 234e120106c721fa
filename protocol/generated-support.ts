/**
 * Small runtime helpers shared by the generated message codecs in `messages/`. Kept here (not in the
 * generated files) so the generator stays simple and the helpers can be unit-tested directly.
 */
import { ProtocolError } from './errors.js';
import type { TaggedField } from './reader.js';
import { sizeOfUtf8, sizeOfUvarint } from './writer.js';
import type { Writer } from './writer.js';

/** Default for non-nullable `bytes` fields. Shared and empty, so it cannot be mutated meaningfully. */
export const EMPTY_BUFFER: Buffer = Buffer.alloc(0);

/** Kafka's all-zero UUID (`Uuid.ZERO_UUID`) in the codec's base64url form. */
export const ZERO_UUID = 'AAAAAAAAAAAAAAAAAAAAAA';

export function checkVersion(apiKey: number, version: number, min: number, max: number): void {
  if (!(Number.isInteger(version) && version >= min && version <= max)) {
    throw new ProtocolError(
      'UNSUPPORTED_VERSION',
      `api ${apiKey} version ${version} is outside ${min}..${max}`,
      -1,
      apiKey,
      version,
    );
  }
}

/** Writing a non-default value into a version that has no room for it would silently lose it (Kafka throws too). */
export function unsupportedField(struct: string, field: string, version: number): ProtocolError {
  return new ProtocolError(
    'UNSUPPORTED_FIELD_VERSION',
    `${struct}.${field} has a non-default value but version ${version} cannot carry it`,
    -1,
  );
}

/** Narrows a value to non-null in a version where the field is not nullable. */
export function notNull<T>(v: T | null, where: string): T {
  if (v === null)
    throw new ProtocolError('UNEXPECTED_NULL', `${where} is null in a version where it is not nullable`, -1);
  return v;
}

/** Writes the unknown tagged fields whose tag is below `beforeTag`, from index `from`; returns the next index. */
export function writeUnknownTagsBefore(
  w: Writer,
  unknown: readonly TaggedField[] | undefined,
  from: number,
  beforeTag: number,
): number {
  if (unknown === undefined) return from;
  let i = from;
  while (i < unknown.length && unknown[i]!.tag < beforeTag) w.rawTaggedField(unknown[i++]!);
  return i;
}

export function sizeOfUnknownTags(unknown: readonly TaggedField[] | undefined): number {
  if (unknown === undefined) return 0;
  let n = 0;
  for (const f of unknown) n += sizeOfUvarint(f.tag) + sizeOfUvarint(f.data.length) + f.data.length;
  return n;
}

export function sizeOfString(v: string): number {
  return 2 + sizeOfUtf8(v);
}

export function sizeOfNullableString(v: string | null): number {
  return v === null ? 2 : 2 + sizeOfUtf8(v);
}

export function sizeOfCompactString(v: string): number {
  const n = sizeOfUtf8(v);
  return sizeOfUvarint(n + 1) + n;
}

export function sizeOfCompactNullableString(v: string | null): number {
  return v === null ? 1 : sizeOfCompactString(v);
}

export function sizeOfBytes(v: Buffer): number {
  return 4 + v.length;
}

export function sizeOfNullableBytes(v: Buffer | null): number {
  return v === null ? 4 : 4 + v.length;
}

export function sizeOfCompactBytes(v: Buffer): number {
  return sizeOfUvarint(v.length + 1) + v.length;
}

export function sizeOfCompactNullableBytes(v: Buffer | null): number {
  return v === null ? 1 : sizeOfCompactBytes(v);
}

export function hasNoUnknownTags(unknown: readonly TaggedField[] | undefined): boolean {
  return unknown === undefined || unknown.length === 0;
}
