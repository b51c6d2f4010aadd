// A live scrape of rblkd's /metrics passes Prometheus' own lint (issue 28 §4):
// `promtool check metrics` when promtool is installed (Debian package
// `prometheus`, ~96 MB installed, so not among scripts/setup.sh's packages),
// and always the rules of promtool's lint that a name can break (promlint:
// counters end in _total and nothing else does, every metric has HELP, no
// colons, no camelCase, no reserved histogram suffix on another type).
// rblk_build_info and the reload result series follow a bad and a good reload.
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { controlRequest } from '../../target/daemon/control-client.js';
import { baseConfig, spawnDaemon, workdir } from './helpers/daemon-process.js';

interface Family {
  type?: string;
  help?: string;
  samples: string[];
}

/** Families by name from the text format: their TYPE, HELP and sample lines. */
function families(text: string): Map<string, Family> {
  const out = new Map<string, Family>();
  const get = (n: string): Family => {
    let f = out.get(n);
    if (f === undefined) out.set(n, (f = { samples: [] }));
    return f;
  };
  for (const line of text.split('\n')) {
    const meta = /^# (TYPE|HELP) (\S+) ?(.*)$/.exec(line);
    if (meta) {
      if (meta[1] === 'TYPE') get(meta[2]!).type = meta[3];
      else get(meta[2]!).help = meta[3];
      continue;
    }
    if (line === '' || line.startsWith('#')) continue;
    const name = /^([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(line)![1]!;
    const base = [...out.keys()].find((n) => out.get(n)?.type === 'histogram' && /_(bucket|sum|count)$/.test(name) && name.replace(/_(bucket|sum|count)$/, '') === n);
    get(base ?? name).samples.push(line);
  }
  return out;
}

/** What promtool's lint (client_golang promlint) says of each family's name, type and help. */
export function lint(text: string): string[] {
  const problems: string[] = [];
  for (const [name, f] of families(text)) {
    if (f.help === undefined || f.help === '') problems.push(`${name}: no help text`);
    if (f.type === 'counter' && !name.endsWith('_total')) problems.push(`${name}: counter metrics should have "_total" suffix`);
    if (f.type !== 'counter' && name.endsWith('_total')) problems.push(`${name}: non-counter metrics should not have "_total" suffix`);
    if (name.includes(':')) problems.push(`${name}: metric names should not contain ':'`);
    if (/[A-Z]/.test(name)) problems.push(`${name}: metric names should be written in 'snake_case' not 'camelCase'`);
    if (f.type !== 'histogram' && f.type !== 'summary' && /_(bucket|count|sum)$/.test(name)) problems.push(`${name}: non-histogram and non-summary metrics should not have a reserved suffix`);
    if (f.type !== 'histogram' && f.samples.some((s) => /[{,]le="/.test(s))) problems.push(`${name}: non-histogram metrics should not have "le" label`);
  }
  return problems;
}

function hasPromtool(): boolean {
  return spawnSync('promtool', ['--version'], { stdio: 'ignore' }).status === 0;
}

async function scrape(port: number): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  return res.text();
}

function value(text: string, name: string): number {
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text);
  if (m === null) throw new Error(`${name} not in the scrape`);
  return Number(m[1]);
}

test('a live scrape passes promtool lint rules; rblk_build_info and the reload result series', async (t) => {
  const w = workdir(t);
  const socket = join(w.dir, 'rblkd.ctl');
  const config = (volumes: Record<string, unknown>[]): Record<string, unknown> =>
    baseConfig(w, volumes, { control: { socket }, metrics: { address: '127.0.0.1', port: 0 } });
  w.writeConfig(config([{ name: 'a', memory: true, size: '4MiB' }]));
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const port = Number((await d.waitForLine(/metrics on http:\/\/127\.0\.0\.1:(\d+)\/metrics/))[1]);
  await d.waitForLine(/rblkd ready/);

  const first = await scrape(port);
  t.deepEqual(lint(first), []);
  // The per-type gauges stay; their _total sums, named like counters, go.
  t.regex(first, /^# TYPE nodejs_active_handles gauge$/m);
  t.notRegex(first, /^nodejs_active_(handles|requests|resources)_total/m);
  const version = (await controlRequest(socket, 'status')) as { version: string };
  t.regex(first, new RegExp(`^rblk_build_info\\{version="${version.version.replace(/\./g, '\\.')}",node_version="${process.version.replace(/\./g, '\\.')}"\\} 1$`, 'm'));
  t.is(value(first, 'rblk_config_last_reload_successful'), 1, 'the start is a load that applied');
  const started = value(first, 'rblk_config_last_reload_success_timestamp_seconds');
  t.true(started > 1.7e9 && started <= Date.now() / 1000, `${started}`);

  // A refused reload: 0, and the time of the last good one stays.
  w.writeConfig(config([{ name: 'a', memory: true, size: '4MiB', lun: 0 }, { name: 'b', memory: true, size: '1MiB', lun: 0 }]));
  t.false(((await controlRequest(socket, 'reload')) as { applied: boolean }).applied);
  const refused = await scrape(port);
  t.is(value(refused, 'rblk_config_last_reload_successful'), 0);
  t.is(value(refused, 'rblk_config_last_reload_success_timestamp_seconds'), started);

  // A good one: 1 again, at a later time.
  w.writeConfig(config([{ name: 'a', memory: true, size: '4MiB' }, { name: 'b', memory: true, size: '1MiB' }]));
  t.true(((await controlRequest(socket, 'reload')) as { applied: boolean }).applied);
  const good = await scrape(port);
  t.is(value(good, 'rblk_config_last_reload_successful'), 1);
  t.true(value(good, 'rblk_config_last_reload_success_timestamp_seconds') > started);
  t.deepEqual(lint(good), []);

  if (!hasPromtool()) {
    t.log('promtool is not installed (Debian package prometheus): the lint rules above stand in for it');
    return;
  }
  const r = spawnSync('promtool', ['check', 'metrics'], { input: good, encoding: 'utf8' });
  t.is(r.status, 0, `promtool check metrics:\n${r.stdout}${r.stderr}`);
});

test('the lint catches what promtool catches', (t) => {
  t.deepEqual(lint('# HELP x_total a\n# TYPE x_total gauge\nx_total 1\n'), ['x_total: non-counter metrics should not have "_total" suffix']);
  t.deepEqual(lint('# HELP y a\n# TYPE y counter\ny 1\n'), ['y: counter metrics should have "_total" suffix']);
  t.deepEqual(lint('# TYPE z gauge\nz 1\n'), ['z: no help text']);
  t.deepEqual(lint('# HELP h a\n# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n'), []);
});
