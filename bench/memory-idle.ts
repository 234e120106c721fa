// Idle client connections for the memory benchmarks (bench/memory.ts, bench/memory-probe.ts).
import { RawClient, apiVersionsRequest } from '../test/harness/raw-client.js';

/**
 * Opens `n` connections to `address` in waves of 100, each answered one ApiVersions (so that a
 * proxy has opened its broker connection too).
 */
export async function openIdle(address: string, n: number): Promise<RawClient[]> {
  const conns: RawClient[] = [];
  for (let i = 0; i < n; i += 100) {
    const wave = await Promise.all(
      Array.from({ length: Math.min(100, n - i) }, () => RawClient.connect(address)),
    );
    for (const c of wave) c.write(apiVersionsRequest(3, 1));
    await Promise.all(wave.map((c) => c.read(1)));
    conns.push(...wave);
  }
  return conns;
}
