// kop_admin_cli_changes_total: the offsets CLI's changes, read from the store's counts at scrape
// time; never going down, and a store that does not answer leaves the last values.
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { storeCountName } from './audit.js';
import { cliChangesCounter } from './audit-metrics.js';

const series = async (registry: Registry) =>
  (await registry.getSingleMetricAsString('kop_admin_cli_changes_total'))
    .split('\n')
    .filter((l) => !l.startsWith('#') && l !== '');

describe('kop_admin_cli_changes_total', () => {
  it("shows the store's CLI counts, ignores other counts, never goes down, waits for no dead store", async () => {
    const registry = new Registry();
    let counts: Map<string, number> | 'hangs' = new Map([
      [storeCountName('set', 'ok'), 2],
      [storeCountName('import', 'ok'), 1],
      ['something:else', 7],
    ]);
    cliChangesCounter(registry, () =>
      counts === 'hangs' ? new Promise(() => {}) : Promise.resolve(new Map(counts)),
    );
    expect(await series(registry)).toEqual([
      'kop_admin_cli_changes_total{route="set",result="ok"} 2',
      'kop_admin_cli_changes_total{route="import",result="ok"} 1',
    ]);
    counts = new Map([
      [storeCountName('set', 'ok'), 1], // the store lost its data and counted again
      [storeCountName('import', 'ok'), 4],
      [storeCountName('delete_group', 'refused'), 0],
    ]);
    expect(await series(registry)).toEqual([
      'kop_admin_cli_changes_total{route="set",result="ok"} 2',
      'kop_admin_cli_changes_total{route="import",result="ok"} 4',
      'kop_admin_cli_changes_total{route="delete_group",result="refused"} 0',
    ]);
    counts = 'hangs';
    const started = Date.now();
    expect(await series(registry)).toHaveLength(3);
    expect(Date.now() - started).toBeLessThan(30_000); // bounded (a second), not a speed check
  });
});
