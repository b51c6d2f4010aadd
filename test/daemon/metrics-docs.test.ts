// docs/operations.md "Metrics" and docs/grafana-dashboard.json stay true to
// the metrics rblkd exposes (target/daemon/metrics.ts).
import test from 'ava';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { rblkMetrics } from '../../target/daemon/metrics.js';
import { ROOT } from './helpers/daemon-process.js';

const EMPTY = {
  volumes: () => [],
  listeners: () => [],
  build: () => ({ version: '0', node_version: 'v0' }),
  lastReload: () => ({ successful: true, successTimestamp: 0 }),
};
const names = rblkMetrics(EMPTY).map((m) => m.name);

test('every rblk metric is in the operations table with its type', (t) => {
  const doc = readFileSync(join(ROOT, 'docs', 'operations.md'), 'utf8');
  for (const m of rblkMetrics(EMPTY)) {
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

test('every series the dashboard shows keeps to its job and instance variables, and each gateway apart', (t) => {
  const dash = JSON.parse(readFileSync(join(ROOT, 'docs', 'grafana-dashboard.json'), 'utf8')) as {
    panels: { title: string; targets: { expr: string; legendFormat?: string }[] }[];
    templating: { list: { name: string; query?: { query?: string } }[] };
  };
  const vars = dash.templating.list.map((v) => v.name);
  t.true(vars.includes('job') && vars.includes('instance'), `variables: ${vars.join(', ')}`);
  const loose: string[] = [];
  for (const p of dash.panels) {
    for (const target of p.targets) {
      // Every selector of a series rblkd exposes (rblk_*, process_*) names both variables.
      for (const m of target.expr.matchAll(/\b((?:rblk|process|nodejs)_[a-z_]+)(\{[^}]*\})?/g)) {
        if (!/job=~"\$job"/.test(m[2] ?? '') || !/instance=~"\$instance"/.test(m[2] ?? '')) loose.push(`${p.title}: ${m[0]}`);
      }
      // An aggregation keeps the gateways apart.
      for (const m of target.expr.matchAll(/sum by \(([^)]*)\)/g)) if (!m[1]!.split(/,\s*/).includes('instance')) loose.push(`${p.title}: sum by (${m[1]!})`);
    }
  }
  t.deepEqual(loose, []);
  // The volume list follows the chosen gateways.
  const volume = dash.templating.list.find((v) => v.name === 'volume');
  t.regex(volume?.query?.query ?? '', /instance=~"\$instance"/);
  // The version and the reload result are on it.
  const exprs = dash.panels.flatMap((p) => p.targets.map((target) => target.expr)).join('\n');
  t.regex(exprs, /rblk_build_info/);
  t.regex(exprs, /rblk_config_last_reload_successful/);
});
