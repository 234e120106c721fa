// deploy/kubernetes/kafka-offset-proxy.yaml is the Helm chart rendered with deploy/kubernetes/values.yaml:
// it is re-rendered here and must be identical, so the plain manifests cannot drift from the chart.
// KOP_UPDATE_DEPLOY=1 (npm run deploy:render) rewrites it.
import fs from 'node:fs';
import { expect, test } from 'vitest';
import { MANIFESTS, onlyObject, parseObjects, renderManifests } from '../harness/deploy.js';

test('deploy/kubernetes/kafka-offset-proxy.yaml is the chart rendered with its values.yaml', () => {
  const expected = renderManifests();
  const current = fs.existsSync(MANIFESTS.output) ? fs.readFileSync(MANIFESTS.output, 'utf8') : '';
  if (current !== expected && process.env['KOP_UPDATE_DEPLOY'] === '1') {
    fs.writeFileSync(MANIFESTS.output, expected);
    return;
  }
  expect(current, 'run `npm run deploy:render` to regenerate').toBe(expected);
});

test('the plain manifests run on a shared Redis with several instances, in their namespace', () => {
  const objects = parseObjects(fs.readFileSync(MANIFESTS.output, 'utf8'));
  const deployment = onlyObject(objects, 'Deployment');
  expect(deployment['spec'].replicas).toBeGreaterThan(1);
  const env = deployment['spec'].template.spec.containers[0].env as { name: string; value?: string }[];
  expect(env.find((e) => e.name === 'KOP_STORE')?.value).toMatch(/^redis:\/\//);
  for (const o of objects)
    expect(o.metadata['namespace'], `${o.kind} ${o.metadata.name}`).toBe(MANIFESTS.namespace);
  // No Secret is shipped: the one they use is created by the operator (docs/deploy.md).
  expect(objects.filter((o) => o.kind === 'Secret')).toEqual([]);
});
