/**
 * kop_admin_changes_total{route, result}: the admin changes the audit (audit.ts) records, counted
 * where the process serves metrics (the proxy's HTTP API). Kept apart from audit.ts so the
 * offsets CLI, which audits but has no metrics endpoint, does not load prom-client.
 */
import { Counter } from 'prom-client';
import type { Registry } from 'prom-client';
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
