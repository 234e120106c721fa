import { describe, expect, test } from 'vitest';
import { ZooKeeperStore } from './zookeeper-store.js';

describe('ZooKeeper client faults thrown where no caller can catch them', () => {
  test("the library's own errors replace the client; other errors are not the store's", async () => {
    // Nothing listens on port 1: the client just keeps trying in the background.
    const store = new ZooKeeperStore('zk://127.0.0.1:1', { operationTimeoutMs: 200 });
    try {
      const clientOf = () => (store as unknown as { session: { client: object } }).session.client;
      const before = clientOf();
      const libraryFault = new Error('Unknown code: -493289471');
      libraryFault.stack = `Error: Unknown code: -493289471
    at Function.validateCode (/app/node_modules/node-zookeeper-client/lib/Exception.js:60:15)
    at ConnectionManager.onSocketData (/app/node_modules/node-zookeeper-client/lib/ConnectionManager.js:570:35)`;
      expect(store.recoverFromFault(libraryFault)).toBe(true);
      expect(clientOf()).toBeDefined();
      expect(clientOf()).not.toBe(before);
      expect(store.recoverFromFault(new Error('something else'))).toBe(false);
      expect(store.recoverFromFault('not an error')).toBe(false);
    } finally {
      await store.close();
    }
  });
});
