/**
 * `npm run generate`: turns every request/response spec in protocol/spec/ into a codec module in
 * protocol/messages/, plus the registry: protocol/messages/api-info.ts and index.ts. Every spec
 * (including header and data specs we do not generate) is parsed, so an unknown key anywhere fails
 * the run.
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { kebabName } from './emit-code.js';
import { MessageEmitter } from './emit-message.js';
import { emitApiInfo, emitRegistry } from './emit-registry.js';
import { hasCodec, loadSpecs } from './spec-model.js';

export const PROTOCOL_DIR = join(dirname(fileURLToPath(import.meta.url)), '..');
export const SPEC_DIR = join(PROTOCOL_DIR, 'spec');
export const MESSAGES_DIR = join(PROTOCOL_DIR, 'messages');

/** All generated files, keyed by file name inside protocol/messages/. */
export function generateAll(specDir = SPEC_DIR): Map<string, string> {
  const specs = loadSpecs(specDir);
  const out = new Map<string, string>();
  const apis = specs.filter(hasCodec);
  for (const spec of apis) out.set(`${kebabName(spec.name)}.ts`, new MessageEmitter(spec).emit());
  out.set('api-info.ts', emitApiInfo(apis, specs));
  out.set('index.ts', emitRegistry(apis));
  return out;
}

function main(): void {
  const files = generateAll();
  mkdirSync(MESSAGES_DIR, { recursive: true });
  for (const old of readdirSync(MESSAGES_DIR)) {
    if (old.endsWith('.ts') && !files.has(old)) rmSync(join(MESSAGES_DIR, old));
  }
  for (const [name, text] of files) writeFileSync(join(MESSAGES_DIR, name), text);
  console.log(`generated ${files.size} files in ${MESSAGES_DIR}`);
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) main();
