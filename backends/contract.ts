/**
 * The one contract every OffsetStore passes. `makeStore` is called more than once per suite; all
 * its stores must share one backend (two proxy instances over one Redis/ZooKeeper/data dir).
 * Its parts, by concern, are the contract-*.ts files beside this one.
 */
import { afterAll, beforeAll, describe } from 'vitest';
import { runCommitContract } from './contract-commits.js';
import { runFencingContract } from './contract-fencing.js';
import { runGroupStateContract } from './contract-group-state.js';
import { runLifecycleContract } from './contract-lifecycle.js';
import { runNameContract } from './contract-names.js';
import { runReadOrderContract } from './contract-read-order.js';
import { ContractStores } from './contract-support.js';
import type { OffsetStore } from './store.js';

export { normalizeState, write } from './contract-support.js';

export function runStoreContract(name: string, makeStore: () => Promise<OffsetStore>): void {
  describe(`OffsetStore contract: ${name}`, () => {
    const ctx = new ContractStores(makeStore);
    beforeAll(() => ctx.open());
    afterAll(() => ctx.close());
    runCommitContract(ctx);
    runReadOrderContract(ctx);
    runFencingContract(ctx);
    runGroupStateContract(ctx);
    runLifecycleContract(ctx);
  });
  runNameContract(name, makeStore);
}
