import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openStore, parseStoreUrl } from './open-store.js';

const dir = mkdtempSync(join(tmpdir(), 'kop-open-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('openStore', () => {
  it('opens the embedded store by default, in the data directory', async () => {
    const s = await openStore(undefined, { dataDir: join(dir, 'default') });
    expect(s.kind).toBe('embedded');
    await s.commit({
      group: 'g',
      writes: [
        {
          topic: 't',
          partition: 0,
          offset: 3n,
          leaderEpoch: -1,
          metadata: '',
          commitTimestamp: 0n,
          expireTimestamp: -1n,
        },
      ],
      requestId: 'r',
    });
    await s.close();
    const again = await openStore('embedded:///' + join(dir, 'default').replace(/^\//, ''), {});
    expect((await again.fetch('g', null))[0]?.offset).toBe(3n);
    await again.close();
  });

  it('embedded:<dir> opens the embedded store in that directory, relative or absolute', async () => {
    expect(parseStoreUrl('embedded:rel/data', 'unused')).toMatchObject({ kind: 'embedded', dir: 'rel/data' });
    expect(parseStoreUrl('embedded:', 'the-data-dir')).toMatchObject({ dir: 'the-data-dir' });
    expect(parseStoreUrl('embedded:///var/lib/kop%20data')).toMatchObject({ dir: '/var/lib/kop data' });
    const absolute = await openStore(`embedded:${join(dir, 'abs')}`, {});
    await absolute.close();
    expect(existsSync(join(dir, 'abs'))).toBe(true);
  });

  it('picks the store by scheme', async () => {
    const mem = await openStore('memory://', {});
    expect(mem.kind).toBe('memory');
    await mem.close();
    const redis = await openStore('redis://127.0.0.1:1', { operationTimeoutMs: 200 });
    expect(redis.kind).toBe('redis');
    await redis.close();
    const cluster = await openStore('redis+cluster://127.0.0.1:1,127.0.0.1:2', { operationTimeoutMs: 200 });
    expect(cluster.kind).toBe('redis');
    await cluster.close();
    const zk = await openStore('zk://127.0.0.1:1/chroot', { operationTimeoutMs: 200 });
    expect(zk.kind).toBe('zookeeper');
    await zk.close();
  });

  it('fails fast and clearly against a store that is not there', async () => {
    const redis = await openStore('redis://127.0.0.1:1', { operationTimeoutMs: 300 });
    const t0 = Date.now();
    await expect(redis.ping()).rejects.toMatchObject({ name: 'StoreUnavailableError' });
    expect(Date.now() - t0).toBeLessThan(1500);
    await redis.close();
    const zk = await openStore('zk://127.0.0.1:1', { operationTimeoutMs: 300 });
    await expect(zk.fetch('g', null)).rejects.toMatchObject({
      name: 'StoreUnavailableError',
      timedOut: true,
    });
    await zk.close();
  });

  it('rejects bad URLs with a message naming what is expected, without the password', async () => {
    await expect(openStore('mysql://u:pw@h/db', {})).rejects.toThrow(
      /unsupported store URL .*expected one of/,
    );
    await expect(openStore('mysql://u:pw@h/db', {})).rejects.not.toThrow(/pw/);
    await expect(openStore('redis+sentinel://a:1', {})).rejects.toThrow(/master name/);
    await expect(openStore('zk://nohostport', {})).rejects.toThrow(/host:port/);
    await expect(openStore('memory://x', {})).rejects.toThrow(/memory:\/\//);
    await expect(openStore('localhost:6379', {})).rejects.toThrow(/unsupported/);
    await expect(openStore(undefined, { operationTimeoutMs: 0 })).rejects.toThrow(/timeout/);
  });
});
