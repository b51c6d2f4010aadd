// rblkd's log as journald and log shippers read it (docs/operations.md "Logs
// and the journal"): the stream protocol's <N> priorities when stderr is the
// journal's stream, native journal entries with their fields through
// libsystemd, the peer address on session lines, one type per JSON field,
// and debug lines from every layer.
import test, { type ExecutionContext } from 'ava';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, statSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { LoginError } from '../../initiator/connection.js';
import { nativeFeatures } from '../../native/binding.js';
import { baseConfig, ROOT, spawnDaemon, workdir, type Workdir } from './helpers/daemon-process.js';
import { login } from './helpers/initiator.js';
import { untilValue as until } from '../../bench/kit/wait.js';

const BIN = join(ROOT, 'bin-src', 'rblkd.ts');
const GUARD_MS = 20_000;
const JOURNAL_SOCKET = '/run/systemd/journal/socket';

/** rblkd with stderr on a regular file that JOURNAL_STREAM names, as systemd sets it for StandardError=journal. */
function underJournal(t: ExecutionContext, w: Workdir, env: Record<string, string>): { child: ChildProcess; lines: () => string[]; exited: Promise<number | null> } {
  const logPath = join(w.dir, 'stderr.log');
  const fd = openSync(logPath, 'a');
  const st = statSync(logPath);
  const base = { ...process.env };
  for (const k of ['NOTIFY_SOCKET', 'WATCHDOG_USEC', 'WATCHDOG_PID', 'JOURNAL_STREAM', 'RBLK_JOURNAL']) delete base[k];
  const child = spawn(process.execPath, ['--import=tsx', BIN, '--config', w.configPath], {
    cwd: ROOT,
    env: { ...base, JOURNAL_STREAM: `${st.dev}:${st.ino}`, ...env },
    stdio: ['ignore', 'ignore', fd],
  });
  closeSync(fd);
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  });
  return { child, exited, lines: () => readFileSync(logPath, 'utf8').split('\n').filter((l) => l !== '') };
}

const debugConfig = (w: Workdir, extra: Record<string, unknown> = {}): Record<string, unknown> =>
  baseConfig(w, [{ name: 'a', path: 'a.img', size: '1MiB' }], { logging: { level: 'debug' }, ...extra });

test('under journald (stream protocol): every line has its priority, session lines their peer, debug says what each layer does', async (t) => {
  const w = workdir(t);
  w.writeConfig(debugConfig(w));
  const d = underJournal(t, w, { RBLK_JOURNAL: 'stream' });
  const port = Number((await until(() => d.lines().map((l) => /listening tcp 127\.0\.0\.1:(\d+)/.exec(l)).find((m) => m !== null) ?? undefined, 'the listening line'))[1]);
  await until(() => d.lines().find((l) => l.includes('rblkd ready')), 'ready');

  const c = await login(port, { initiatorName: 'iqn.2026-11.io.rblk:journal' });
  await c.close();
  await t.throwsAsync(login(port, { targetName: 'iqn.2026-11.io.rblk:nobody' }), { instanceOf: LoginError });
  // A refused reload is logged at error.
  w.writeConfig('volumes: [\n');
  d.child.kill('SIGHUP');
  await until(() => d.lines().find((l) => l.startsWith('<3>error: reload refused')), 'the refused reload at priority 3');
  d.child.kill('SIGTERM');
  t.is(await d.exited, 0);

  const lines = d.lines();
  for (const l of lines) t.regex(l, /^<[3467]>/, `a line without a priority: ${l}`);
  // The journal stamps each entry itself: no timestamp in the line.
  t.false(lines.some((l) => /^<\d>\d{4}-\d\d-\d\dT/.test(l)));
  const loggedIn = lines.find((l) => l.includes('info: logged in'));
  t.truthy(loggedIn);
  t.regex(loggedIn!, /^<6>info: logged in: .* session=\d+ initiator=iqn\.2026-11\.io\.rblk:journal peer=127\.0\.0\.1:\d+ connection=\d+/);
  t.regex(lines.find((l) => l.includes('session ended')) ?? '', /^<6>.* peer=127\.0\.0\.1:\d+/);
  t.regex(lines.find((l) => l.includes('login refused: unknown target name')) ?? '', /^<4>warn: .* peer=127\.0\.0\.1:\d+/);
  // Debug, layer by layer: backend open, transport accept and close, login steps.
  for (const re of [/^<7>debug: volume a: opening /, /^<7>debug: volume a: backend open/, /^<7>debug: accepted a connection on tcp:/, /^<7>debug: LOGIN_REQ: target /, /^<7>debug: transport closed the connection/]) {
    t.true(
      lines.some((l) => re.test(l)),
      `no line matches ${re}`,
    );
  }
});

test('JSON logs: session, connection and lun are numbers wherever they appear; peer on session lines', async (t) => {
  const w = workdir(t);
  w.writeConfig(baseConfig(w, [{ name: 'a', memory: true, size: '1MiB' }], { logging: { format: 'json', level: 'debug' } }));
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const port = await d.port();
  await d.waitForLine(/rblkd ready/);
  const c = await login(port);
  // A reload whose plan the debug line shows.
  d.kill('SIGHUP');
  await d.waitForLine(/reload plan: add \[\], remove \[\], keep \[a\]/);
  await c.close();
  await d.waitForLine(/session ended/);
  d.kill('SIGTERM');
  t.is((await d.exited).code, 0);

  const entries = d.lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  const typed = entries.filter((e) => 'session' in e || 'connection' in e || 'lun' in e);
  t.true(typed.length >= 3);
  for (const e of typed) {
    for (const k of ['session', 'connection', 'lun']) if (k in e) t.is(typeof e[k], 'number', `${k} in ${JSON.stringify(e)}`);
  }
  // Volume lines, debug ones included, carry both the volume and its LUN.
  const volumeLines = entries.filter((e) => /^(volume a:|serving volume a )/.test(String(e.message)));
  t.true(volumeLines.length >= 3, JSON.stringify(volumeLines));
  for (const e of volumeLines) t.like(e, { volume: 'a', lun: 0 }, JSON.stringify(e));
  const sessionLines = entries.filter((e) => 'session' in e);
  t.true(sessionLines.length >= 2);
  for (const e of sessionLines) t.regex(String(e.peer), /^127\.0\.0\.1:\d+$/, JSON.stringify(e));
});

const python = spawnSync('python3', ['--version']).status === 0;
const haveJournald = existsSync(JOURNAL_SOCKET);
const haveSystemd = nativeFeatures().sd_notify;
const nativeTest = !python || haveJournald || !haveSystemd ? test.skip : test.serial;
if (!python || haveJournald || !haveSystemd) {
  const why = !python ? 'python3 is missing' : haveJournald ? `a journald owns ${JOURNAL_SOCKET} here` : 'rblk_systemd.node is not built';
  test.skip(`(native journal entries: skipped because ${why})`, () => undefined);
}

nativeTest('under journald with libsystemd: one journal entry per line, with PRIORITY and the fields', async (t) => {
  // journald's socket, played by journal-socket.py, since the test cannot read a real journal back.
  // The first directory it had to make, if any: teardown removes what it made and nothing more.
  const created = mkdirSync('/run/systemd/journal', { recursive: true });
  const receiver = spawn('python3', [join(ROOT, 'test', 'daemon', 'helpers', 'journal-socket.py'), JOURNAL_SOCKET], { stdio: ['ignore', 'pipe', 'inherit'] });
  const entries: Record<string, string>[] = [];
  let partial = '';
  receiver.stdout.setEncoding('utf8').on('data', (s: string) => {
    partial += s;
    const parts = partial.split('\n');
    partial = parts.pop()!;
    for (const p of parts) entries.push(JSON.parse(p) as Record<string, string>);
  });
  t.teardown(() => {
    receiver.kill('SIGKILL');
    try {
      unlinkSync(JOURNAL_SOCKET);
      if (created !== undefined) rmSync(created, { recursive: true, force: true });
    } catch {
      // Already gone.
    }
  });
  // Its first line says it is bound.
  await until(() => (entries.length > 0 ? true : undefined), 'the journal stand-in');

  const w = workdir(t);
  w.writeConfig(debugConfig(w));
  const d = underJournal(t, w, {});
  const ready = await until(() => entries.find((e) => e.MESSAGE?.includes('rblkd ready')), 'ready in the journal');
  t.is(ready.PRIORITY, '6');
  t.is(ready.SYSLOG_IDENTIFIER, 'rblkd');
  t.false('CODE_FILE' in ready);
  const listening = entries.find((e) => e.MESSAGE?.includes('listening tcp'));
  const port = Number(/127\.0\.0\.1:(\d+)/.exec(listening!.MESSAGE!)![1]);
  const c = await login(port, { initiatorName: 'iqn.2026-11.io.rblk:native' });
  await c.close();
  const loggedIn = await until(() => entries.find((e) => e.MESSAGE?.startsWith('info: logged in')), 'the login entry');
  t.regex(loggedIn.SESSION ?? '', /^\d+$/);
  t.is(loggedIn.INITIATOR, 'iqn.2026-11.io.rblk:native');
  t.regex(loggedIn.PEER ?? '', /^127\.0\.0\.1:\d+$/);
  t.is(loggedIn.PRIORITY, '6');
  t.truthy(entries.find((e) => e.PRIORITY === '7' && e.VOLUME === 'a'), 'a debug entry for volume a');
  d.child.kill('SIGTERM');
  t.is(await d.exited, 0);
  // Nothing went to the stream: the journal had every line.
  t.deepEqual(d.lines(), []);
});

// libsystemd's sd_journal_sendv(3) reports success when the journal socket does not exist, so
// a daemon that trusted it would log nothing at all (issue 25).
const absentTest = haveJournald || !haveSystemd ? test.skip : test.serial;
if (haveJournald || !haveSystemd) {
  test.skip(`(no journal socket: skipped because ${haveJournald ? `a journald owns ${JOURNAL_SOCKET} here` : 'rblk_systemd.node is not built'})`, () => undefined);
}

absentTest('under journald with libsystemd but no journal socket: rblkd says so once and logs on the stream with priorities', async (t) => {
  // Serial with the native test above, which is the only one that makes the socket.
  t.false(existsSync(JOURNAL_SOCKET));
  const w = workdir(t);
  w.writeConfig(debugConfig(w));
  const d = underJournal(t, w, {});
  await until(() => (d.lines().some((l) => l.includes('rblkd ready')) ? true : undefined), 'rblkd ready on the stream');
  const lines = d.lines();
  const said = lines.filter((l) => /native journal/.test(l));
  t.is(said.length, 1, lines.join('\n'));
  t.regex(said[0] ?? '', new RegExp(`^<4>warn: the native journal is unavailable \\(no socket at ${JOURNAL_SOCKET}\\); using the stream protocol$`));
  t.true(lines.some((l) => /^<6>info: rblkd ready/.test(l)), lines.join('\n'));
  t.true(lines.some((l) => /^<7>debug: volume a:/.test(l)), lines.join('\n'));
  t.true(lines.every((l) => /^<[3-7]>/.test(l)), lines.join('\n'));
  d.child.kill('SIGTERM');
  t.is(await d.exited, 0);
});
