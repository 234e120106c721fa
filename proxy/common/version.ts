/** This build's version: the `version` of the package.json the running code belongs to. */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

let cached: string | undefined;

export function productVersion(): string {
  if (cached !== undefined) return cached;
  // proxy/common/version.ts runs from the source tree (tsx, vitest) or from dist/proxy/common/:
  // look upwards.
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 4; i++) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === 'kafka-offset-proxy' && typeof pkg.version === 'string') return (cached = pkg.version);
    } catch {
      // not here
    }
    dir = path.dirname(dir);
  }
  return (cached = 'unknown');
}
