// docs/operations.md "Metrics" and docs/grafana-dashboard.json stay true to
// the metrics rblkd exposes (target/daemon/metrics.ts).
import test from 'ava';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { rblkMetrics } from '../../target/daemon/metrics.js';
import { ROOT } from './helpers/daemon-process.js';

const names = rblkMetrics({ volumes: () => [], listeners: () => [] }).map((m) => m.name);

test('every rblk metric is in the operations table with its type', (t) => {
  const doc = readFileSync(join(ROOT, 'docs', 'operations.md'), 'utf8');
  for (const m of rblkMetrics({ volumes: () => [], listeners: () => [] })) {
    t.regex(doc, new RegExp(`\\| \`${m.name}\` \\| ${m.type} \\|`), m.name);
  }
});

test('the Grafana dashboard is JSON that uses only metrics rblkd exposes', (t) => {
  const dash = JSON.parse(readFileSync(join(ROOT, 'docs', 'grafana-dashboard.json'), 'utf8')) as { panels: { targets: { expr: string }[] }[] };
  t.true(dash.panels.length > 0);
  const used = new Set<string>();
  for (const p of dash.panels) for (const target of p.targets) for (const m of target.expr.matchAll(/\b(rblk_[a-z_]+)/g)) used.add(m[1]!);
  t.true(used.size >= 5);
  for (const u of used) t.true(names.includes(u.replace(/_(bucket|sum|count)$/, '')), `${u} is not a metric rblkd exposes`);
});
