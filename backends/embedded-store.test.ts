import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { runStoreContract } from './contract.js';
import { EmbeddedStore } from './embedded-store.js';

// LMDB is a local library (no server), so its contract run is a unit test.
const dir = mkdtempSync(join(tmpdir(), 'kop-embedded-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
runStoreContract('embedded', async () => new EmbeddedStore({ dataDir: dir }));
