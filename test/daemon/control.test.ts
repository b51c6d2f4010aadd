// The control socket, `rblkd ctl` and the Prometheus endpoint against the real
// rblkd, with a real session: what they report is checked against the bytes
// this test moved (docs/operations.md "The control socket", "Metrics").
import test from 'ava';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { LogoutReason } from '../../protocol/wire/index.js';
import * as cdb from '../../protocol/scsi/cdb.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { controlRequest } from '../../target/daemon/control-client.js';
import { rblkGid } from '../../target/daemon/control-server.js';
import type { SessionInfo } from '../../target/connection/environment.js';
import { assertReturned, baseline } from '../helpers/resources.js';
import { baseConfig, ctl, ROOT, spawnDaemon, workdir } from './helpers/daemon-process.js';
import { command, login, pattern, read, write } from './helpers/initiator.js';
import { until } from '../../bench/kit/wait.js';

const GUARD_MS = 20_000;

/** Prometheus text exposition: every sample line, by its full name with labels; throws on a line that is not one. */
function parseProm(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) {
      if (line.startsWith('# TYPE ')) {
        if (!/^# TYPE [a-zA-Z_:][a-zA-Z0-9_:]* (counter|gauge|histogram|summary|untyped)$/.test(line)) throw new Error(`bad TYPE line: ${line}`);
      }
      continue;
    }
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})?) (-?[0-9.eE+-]+|NaN|[+-]Inf)$/.exec(line);
    if (!m) throw new Error(`not a Prometheus sample line: ${JSON.stringify(line)}`);
    samples.set(m[1]!, Number(m[2]));
  }
  return samples;
}

interface VolumeRow {
  name: string;
  counters: Record<string, { ops: number; bytes: number; errors: number }>;
}

test('control socket: sessions with their peer, volume counters, kick, reload, metrics; the socket goes at exit', async (t) => {
  const w = workdir(t);
  const socket = join(w.dir, 'rblkd.ctl');
  const config = (volumes: Record<string, unknown>[]): Record<string, unknown> =>
    baseConfig(w, volumes, { control: { socket }, metrics: { address: '127.0.0.1', port: 0 } });
  w.writeConfig(config([{ name: 'a', memory: true, size: '4MiB' }]));
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const port = await d.port();
  const metricsPort = Number((await d.waitForLine(/metrics on http:\/\/127\.0\.0\.1:(\d+)\/metrics/))[1]);
  await d.waitForLine(/rblkd ready/);

  t.true(statSync(socket).isSocket());
  t.is(statSync(socket).mode & 0o777, rblkGid() === null ? 0o600 : 0o660);
  const status = (await controlRequest(socket, 'status')) as { metrics: { port: number }; volumes: number; version: string; pid: number };
  t.is(status.metrics.port, metricsPort);
  t.is(status.version, (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version);
  t.is(status.pid, d.child.pid!);
  t.is(status.volumes, 1);
  // Warmed up (a control connection, a scrape, the fabric provider through a first session): the fds every later one must give back.
  await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  await (await login(port, { initiatorName: 'iqn.2026-11.io.rblk:warm-up' })).close();
  const base = await baseline(d.child.pid!);

  const c = await login(port, { initiatorName: 'iqn.2026-11.io.rblk:ops' });
  t.teardown(() => c.close());
  // The power-on unit attention (29/00) is reported here, so the write below is the volume's one write.
  t.is((await command(c, { lun: 0, cdb: cdb.testUnitReady() })).status, ScsiStatus.GOOD);
  const data = pattern(65536, 7);
  t.is((await write(c, 0, 0, data)).status, ScsiStatus.GOOD);
  const back = await read(c, 0, 0, 128);
  t.true(back.data.equals(data));

  // The operator's command line, as JSON.
  const listed = await ctl(['sessions', '--json', '--socket', socket]);
  t.is(listed.code, 0, listed.stderr);
  const sessions = JSON.parse(listed.stdout) as SessionInfo[];
  const mine = sessions.find((s) => s.initiator === 'iqn.2026-11.io.rblk:ops');
  t.truthy(mine, listed.stdout);
  t.regex(mine!.peer, /^127\.0\.0\.1:\d+$/);
  t.is(mine!.provider, 'tcp');
  t.true(mine!.credits > 0);
  t.is(mine!.writeBytes, 65536);
  t.is(mine!.readBytes, 65536);
  t.is(mine!.inFlight, 0);

  const volumes = (await controlRequest(socket, 'volumes')) as VolumeRow[];
  t.is(volumes.length, 1);
  t.is(volumes[0]!.counters.write!.bytes, 65536);
  t.is(volumes[0]!.counters.write!.ops, 1);
  t.is(volumes[0]!.counters.read!.bytes, 65536);
  t.is(volumes[0]!.counters.write!.errors, 0);
  t.is(volumes[0]!.counters.other!.errors, 0, "the login's unit attention is no error");
  const table = await ctl(['volumes', '--socket', socket]);
  t.is(table.code, 0, table.stderr);
  t.regex(table.stdout, /^NAME +LUN +SIZE/);
  t.regex(table.stdout, /\na +0 +4 MiB +memory/);

  const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
  t.is(res.status, 200);
  t.regex(res.headers.get('content-type') ?? '', /^text\/plain/);
  const m = parseProm(await res.text());
  t.is(m.get('rblk_volume_bytes_total{volume="a",op="write"}'), 65536);
  t.is(m.get('rblk_volume_bytes_total{volume="a",op="read"}'), 65536);
  t.is(m.get('rblk_volume_operations_total{volume="a",op="write"}'), 1);
  t.is(m.get('rblk_volume_latency_seconds_count{volume="a",op="write"}'), 1);
  t.is(m.get('rblk_volume_latency_seconds_bucket{volume="a",op="write",le="+Inf"}'), 1);
  t.is(m.get('rblk_volume_size_bytes{volume="a"}'), 4 * 1024 * 1024);
  t.is(m.get(`rblk_listener_sessions{listener="tcp:127.0.0.1:${port}"}`), 1);
  // The log names a listener as the metrics and rblkd ctl do, so one name finds it in all three.
  t.true(d.lines.some((l) => l.endsWith(`listening tcp 127.0.0.1:${port} listener=tcp:127.0.0.1:${port}`)), d.lines.join('\n'));
  t.true((m.get('process_resident_memory_bytes') ?? 0) > 0);
  t.is((await fetch(`http://127.0.0.1:${metricsPort}/other`)).status, 404);

  // kick: the target logs the session out as an administrator would (T_LOGOUT reason 6).
  const from = d.lines.length;
  const kicked = await ctl(['kick', mine!.id, '--socket', socket]);
  t.is(kicked.code, 0, kicked.stderr);
  t.regex(kicked.stdout, new RegExp(`session ${mine!.id} \\(iqn.2026-11.io.rblk:ops, 127\\.0\\.0\\.1:\\d+\\) logged out`));
  await d.waitForLine(/session ended: kicked by the administrator/, from);
  // The kick's own line carries the fields of every session line, the connection number included.
  const kickLine = d.lines.slice(from).find((l) => l.includes(`session ${mine!.id} kicked by the administrator`));
  t.regex(kickLine ?? '', new RegExp(`warn: .* session=${mine!.id} initiator=iqn\\.2026-11\\.io\\.rblk:ops peer=127\\.0\\.0\\.1:\\d+ connection=${mine!.connection}$`));
  await until(() => c.logoutReason === LogoutReason.ADMIN, 'the initiator to hear T_LOGOUT');
  t.false(((await controlRequest(socket, 'sessions')) as SessionInfo[]).some((s) => s.id === mine!.id));
  const missing = await ctl(['kick', mine!.id, '--socket', socket]);
  t.is(missing.code, 1);
  t.regex(missing.stderr, /no session/);

  // reload: the same plan SIGHUP runs, with its result.
  w.writeConfig(config([{ name: 'a', memory: true, size: '4MiB' }, { name: 'b', memory: true, size: '1MiB' }]));
  const reloaded = (await controlRequest(socket, 'reload')) as { applied: boolean; added: string[]; removed: string[] };
  t.true(reloaded.applied);
  t.deepEqual(reloaded.added, ['b']);
  t.deepEqual(reloaded.removed, []);
  t.deepEqual(((await controlRequest(socket, 'volumes')) as VolumeRow[]).map((v) => v.name).sort(), ['a', 'b']);
  w.writeConfig(config([{ name: 'a', memory: true, size: '4MiB', lun: 0 }, { name: 'b', memory: true, size: '1MiB', lun: 0 }]));
  const refused = await ctl(['reload', '--socket', socket]);
  t.is(refused.code, 1);
  t.regex(refused.stdout, /reload refused/);
  // A reload may close the metrics endpoint, and open it again elsewhere.
  const two = [{ name: 'a', memory: true, size: '4MiB' }, { name: 'b', memory: true, size: '1MiB' }];
  w.writeConfig(baseConfig(w, two, { control: { socket } }));
  t.true(((await controlRequest(socket, 'reload')) as { applied: boolean }).applied);
  t.is(((await controlRequest(socket, 'status')) as { metrics: unknown }).metrics, null);
  await t.throwsAsync(fetch(`http://127.0.0.1:${metricsPort}/metrics`));
  w.writeConfig(config(two));
  t.true(((await controlRequest(socket, 'reload')) as { applied: boolean }).applied);
  const moved = ((await controlRequest(socket, 'status')) as { metrics: { port: number } }).metrics.port;
  t.is((await fetch(`http://127.0.0.1:${moved}/metrics`)).status, 200);

  // Bad requests get an answer saying why, on the same connection, in order; the daemon carries on.
  const raw = connect(socket);
  raw.setEncoding('utf8');
  let answers = '';
  raw.on('data', (s: string) => (answers += s));
  raw.write('not json\n{"command":"nope"}\n{"command":"kick"}\n{"command":"status"}\n');
  await until(() => answers.split('\n').length > 4, 'four answers');
  raw.destroy();
  const [a1, a2, a3, a4] = answers.split('\n').map((l) => (l === '' ? null : (JSON.parse(l) as { ok: boolean; error?: string })));
  t.deepEqual(a1, { ok: false, error: 'the request is not JSON' });
  t.regex(a2!.error ?? '', /unknown command "nope"; one of status, sessions, volumes, kick, reload/);
  t.regex(a3!.error ?? '', /kick takes one session id/);
  t.true(a4!.ok);

  for (let i = 0; i < 20; i++) await controlRequest(socket, i % 2 === 0 ? 'sessions' : 'volumes');
  await assertReturned(t, base, { what: 'rblkd after control requests, a scrape, a session and its kick', settleMs: 10_000 });

  d.kill('SIGTERM');
  t.is((await d.exited).code, 0);
  t.false(existsSync(socket));
});

test('rblkd ctl: a mistyped verb or option gets the nearest one, kick without an id says where ids come from; exit 64', async (t) => {
  // Usage errors are found before the socket is opened, so no daemon is needed.
  const socket = ['--socket', '/nonexistent/rblkd.ctl'];
  const cases: [string[], string][] = [
    [['stauts'], "unknown command 'stauts': did you mean 'status'?"],
    [['frob'], "unknown command 'frob': the commands are status, sessions, volumes, kick, reload, snapshot, snapshots, delete-snapshot, clone, flatten, create, resize, delete, qos"],
    [['sessions', '--jsn'], 'unknown option --jsn: did you mean --json?'],
    [['kick'], 'kick needs a SESSION id (rblkd ctl sessions lists them)'],
    [['snapshot', 'vol'], 'snapshot needs VOLUME NAME (rblkd ctl volumes lists the volumes)'],
    [['clone', 'vol@s1'], 'clone needs VOLUME@SNAP NEW (rblkd ctl snapshots VOLUME lists the snapshots)'],
    [['flatten'], 'flatten needs a VOLUME, an rbd clone (rblkd ctl volumes lists them)'],
    [['status', 'extra'], "unexpected argument 'extra'"],
  ];
  for (const [args, said] of cases) {
    const r = await ctl([...args, ...socket]);
    t.is(r.code, 64, args.join(' '));
    t.is(r.stderr, `rblkd ctl: ${said} (see rblkd ctl --help)\n`);
    t.is(r.stdout, '');
  }
});

test('a control socket another rblkd answers on refuses the start; a stale one is replaced', async (t) => {
  const w = workdir(t);
  const socket = join(w.dir, 'rblkd.ctl');
  w.writeConfig(baseConfig(w, [{ name: 'a', memory: true, size: '1MiB' }], { control: { socket } }));
  const first = spawnDaemon(t, ['--config', w.configPath]);
  await first.waitForLine(/rblkd ready/);

  const second = spawnDaemon(t, ['--config', w.configPath]);
  t.is((await second.exited).code, 1);
  t.regex(second.lines.join('\n'), /control socket .*another process .*answers on/);
  t.true(statSync(socket).isSocket());

  // kill -9 leaves the file behind; the next start removes it.
  first.kill('SIGKILL');
  await first.exited;
  t.true(existsSync(socket));
  const third = spawnDaemon(t, ['--config', w.configPath]);
  await third.waitForLine(/removing the stale control socket/);
  await third.waitForLine(/rblkd ready/);
  t.is(((await controlRequest(socket, 'status')) as { pid: number }).pid, third.child.pid!);
  third.kill('SIGTERM');
  t.is((await third.exited).code, 0);
  t.false(existsSync(socket));
});
