import { runStoreContract } from './contract.js';
import { MemoryData, MemoryStore } from './memory-store.js';

const shared = new MemoryData();
runStoreContract('memory', async () => new MemoryStore(shared));
