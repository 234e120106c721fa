/**
 * kop_admin_changes_total{route, result}: the admin changes the audit (audit.ts) records, counted
 * where the process serves metrics (the proxy's HTTP API). Kept apart from audit.ts so the
 * offsets CLI, which audits but has no metrics endpoint, does not load prom-client.
 */
import { Counter } from 'prom-client';
import type { Registry } from 'prom-client';
import type { AdminRoute, AuditResult, CountChange } from './audit.js';

export function adminChangesCounter(registry: Registry): CountChange {
  const counter = new Counter({
    name: 'kop_admin_changes_total',
    help: 'Admin changes of stored offsets over the HTTP API, by route (set, delete, delete_group) and result (ok, refused, bad_input, unavailable, failed, unauthorized, forbidden).',
    labelNames: ['route', 'result'] as const,
    registers: [registry],
  });
  return (route: AdminRoute, result: AuditResult) => counter.inc({ route, result });
}
