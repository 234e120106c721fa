/**
 * kop_admin_changes_total{route, result}: the admin changes the audit (audit.ts) records, counted
 * where the process serves metrics (the proxy's HTTP API); kop_admin_cli_changes_total: the offsets
 * CLI's, read from the store. Kept apart from audit.ts so the offsets CLI, which audits but has no
 * metrics endpoint, does not load prom-client.
 */
import { Counter } from 'prom-client';
import type { Registry } from 'prom-client';
import { parseStoreCountName } from './audit.js';
import type { AdminRoute, AuditResult, CountChange } from './audit.js';

/** What the HTTP API can count (import and dry runs are the CLI's, which has no metrics). */
const HTTP_ROUTES: readonly AdminRoute[] = ['set', 'delete', 'delete_group'];
const HTTP_RESULTS: readonly AuditResult[] = [
  'ok',
  'refused',
  'bad_input',
  'unavailable',
  'failed',
  'unauthorized',
  'forbidden',
];

export function adminChangesCounter(registry: Registry): CountChange {
  const counter = new Counter({
    name: 'kop_admin_changes_total',
    help: 'Admin changes of stored offsets over the HTTP API, by route (set, delete, delete_group) and result (ok, refused, bad_input, unavailable, failed, unauthorized, forbidden).',
    labelNames: ['route', 'result'] as const,
    registers: [registry],
  });
  // Exported as 0 from the start (docs/metrics.md), so an alert on refused attempts works at once.
  for (const route of HTTP_ROUTES) for (const result of HTTP_RESULTS) counter.inc({ route, result }, 0);
  return (route: AdminRoute, result: AuditResult) => counter.inc({ route, result });
}

/** How long a scrape waits for the store's counts before showing the last ones it read. */
const COUNTS_WAIT_MS = 1_000;

/**
 * kop_admin_cli_changes_total{route, result}: the offsets CLI's admin changes, which the CLI counts
 * in the store (it ends before anything could scrape it; OffsetStore.addToCount) and every proxy on
 * that store reads back at scrape time. Each proxy shows the store's total, so across proxies it is
 * max(), not sum(). A store that does not answer within a second leaves the last values read; a
 * count that went down (a store that lost its data) is shown as it was until it passes that value.
 */
export function cliChangesCounter(registry: Registry, readCounts: () => Promise<Map<string, number>>): void {
  const shown = new Map<string, number>();
  let reading: Promise<void> | null = null;
  const refresh = (counter: Counter<'route' | 'result'>): Promise<void> =>
    (reading ??= readCounts()
      .then((counts) => {
        for (const [name, value] of counts) {
          const labels = parseStoreCountName(name);
          if (labels === null) continue;
          const before = shown.get(name) ?? 0;
          if (value > before) counter.inc(labels, value - before);
          else if (!shown.has(name)) counter.inc(labels, 0);
          shown.set(name, Math.max(before, value));
        }
      })
      .catch(() => undefined) // the store's own health is /readyz's and kop_store_*'s to report
      .finally(() => (reading = null)));
  new Counter({
    name: 'kop_admin_cli_changes_total',
    help: 'Admin changes of stored offsets made with the offsets CLI, as counted in the store (the same total on every proxy of the store), by route (set, delete, delete_group, import) and result (ok, refused, bad_input, unavailable, failed); dry runs are not counted.',
    labelNames: ['route', 'result'] as const,
    registers: [registry],
    async collect() {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        refresh(this),
        new Promise<void>((resolve) => (timer = setTimeout(resolve, COUNTS_WAIT_MS))),
      ]);
      clearTimeout(timer);
    },
  });
}
