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
  const dash = JSON.parse(readFileSync(join(ROOT, 'docs', 'grafana-dashboard.json'), 'utf8')) as {
    panels: { targets: { expr: string }[] }[];
    templating?: { list: { query?: string | { query?: string } }[] };
  };
  t.true(dash.panels.length > 0);
  // The panels' queries, and the variables' (label_values(rblk_..., volume)), which pick what the panels show.
  const exprs = dash.panels.flatMap((p) => p.targets.map((target) => target.expr));
  for (const v of dash.templating?.list ?? []) exprs.push(typeof v.query === 'string' ? v.query : (v.query?.query ?? ''));
  const used = new Set<string>();
  for (const e of exprs) for (const m of e.matchAll(/\b(rblk_[a-z_]+)/g)) used.add(m[1]!);
  t.true(used.size >= 5);
  for (const u of used) t.true(names.includes(u.replace(/_(bucket|sum|count)$/, '')), `${u} is not a metric rblkd exposes`);
});
