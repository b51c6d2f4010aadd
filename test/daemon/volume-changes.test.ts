// Volume changes that never surprise (issue 28 §3; docs/operations.md "Stable LUNs",
// "Removing a volume in use"), against the real rblkd: removing a volume moves no other LUN,
// across reloads and restarts, and a new volume does not take a removed one's LUN; removing a
// volume that sessions can see is refused naming them, unless forced; a read-only volume
// whose file is missing is refused with what to do, and the daemon keeps serving.
import test from 'ava';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Connection } from '../../initiator/connection.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { controlRequest } from '../../target/daemon/control-client.js';
import type { ReloadResult } from '../../target/daemon/reload-result.js';
import { baseConfig, ctl, spawnDaemon, workdir, type DaemonProcess, type Workdir } from './helpers/daemon-process.js';
import { login, pattern, read, reportLuns, senseOf } from './helpers/initiator.js';
import { loginStatus, RawInitiator } from '../iscsi/raw-initiator.js';

const MiB = 1024 * 1024;
const SEED: Record<string, number> = { a: 11, b: 22, c: 33, d: 44 };

/** Files whose first MiB is each volume's own pattern, in the state directory. */
function makeFiles(w: Workdir, names: string[]): void {
  mkdirSync(w.state, { recursive: true });
  for (const n of names) writeFileSync(join(w.state, `${n}.img`), pattern(MiB, SEED[n]!));
}

const fileVolume = (n: string): Record<string, unknown> => ({ name: n, path: `${n}.img` });

async function start(t: Parameters<typeof workdir>[0], w: Workdir): Promise<{ d: DaemonProcess; port: number; socket: string }> {
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const port = await d.port();
  await d.waitForLine(/rblkd ready/);
  return { d, port, socket: join(w.dir, 'rblkd.ctl') };
}

async function stop(d: DaemonProcess): Promise<void> {
  d.kill('SIGTERM');
  const exit = await d.exited;
  if (exit.code !== 0) throw new Error(`rblkd exited ${String(exit.code)}`);
}

/** Waits until rblkd lists no session of `initiator`: a logout is answered before its connection ends. */
async function gone(socket: string, initiator: string): Promise<void> {
  for (let i = 0; i < 2000; i++) {
    if (!((await controlRequest(socket, 'sessions')) as { initiator: string | null }[]).some((s) => s.initiator === initiator)) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`the session of ${initiator} did not end`);
}

/** What a fresh login sees: REPORT LUNS, and for each LUN which volume's bytes it reads; the session ends before it returns. */
async function lunMap(port: number, socket: string): Promise<Record<number, string>> {
  const c = await login(port, { initiatorName: 'iqn.2026-11.io.rblk:looker' });
  try {
    const out: Record<number, string> = {};
    for (const lun of await reportLuns(c)) {
      const r = await read(c, lun, 0, 8);
      if (r.result.status !== ScsiStatus.GOOD) throw new Error(`READ of LUN ${lun}: status ${r.result.status}`);
      out[lun] = Object.keys(SEED).find((n) => r.data.equals(pattern(MiB, SEED[n]!).subarray(0, 4096))) ?? 'unknown bytes';
    }
    await c.logout();
    await gone(socket, 'iqn.2026-11.io.rblk:looker');
    return out;
  } finally {
    await c.close();
  }
}

test('removing the middle of three auto-LUN volumes moves neither other, across a restart; a new volume does not take the removed LUN', async (t) => {
  const w = workdir(t);
  makeFiles(w, ['a', 'b', 'c', 'd']);
  w.writeConfig(baseConfig(w, ['a', 'b', 'c'].map(fileVolume)));
  let { d, port, socket } = await start(t, w);
  t.deepEqual(await lunMap(port, socket), { 0: 'a', 1: 'b', 2: 'c' });
  t.deepEqual(JSON.parse(readFileSync(join(w.state, 'luns.json'), 'utf8')), { format: 1, volumes: { a: { lun: 0 }, b: { lun: 1 }, c: { lun: 2 } } });

  w.writeConfig(baseConfig(w, ['a', 'c'].map(fileVolume)));
  const removed = (await controlRequest(socket, 'reload')) as ReloadResult;
  t.deepEqual([removed.applied, removed.removed, removed.errors], [true, ['b'], []], JSON.stringify(removed));
  t.deepEqual(await lunMap(port, socket), { 0: 'a', 2: 'c' }, 'c keeps LUN 2');

  await stop(d);
  ({ d, port, socket } = await start(t, w));
  t.deepEqual(await lunMap(port, socket), { 0: 'a', 2: 'c' }, 'the same LUNs after a restart');

  // d comes first in the file: it still takes neither a taken LUN nor b's remembered one.
  w.writeConfig(baseConfig(w, ['d', 'a', 'c'].map(fileVolume)));
  const added = (await controlRequest(socket, 'reload')) as ReloadResult;
  t.deepEqual([added.applied, added.added, added.errors], [true, ['d'], []], JSON.stringify(added));
  t.deepEqual(await lunMap(port, socket), { 0: 'a', 2: 'c', 3: 'd' });
  t.deepEqual(
    ((await controlRequest(socket, 'volumes')) as { name: string; lun: number }[]).map((v) => [v.name, v.lun]).sort(),
    [['a', 0], ['c', 2], ['d', 3]],
  );
  t.deepEqual(JSON.parse(readFileSync(join(w.state, 'luns.json'), 'utf8')).volumes, { a: { lun: 0 }, b: { lun: 1 }, c: { lun: 2 }, d: { lun: 3 } }, 'b is still remembered');

  // b comes back at its own LUN.
  w.writeConfig(baseConfig(w, ['d', 'a', 'b', 'c'].map(fileVolume)));
  t.true(((await controlRequest(socket, 'reload')) as ReloadResult).applied);
  t.deepEqual(await lunMap(port, socket), { 0: 'a', 1: 'b', 2: 'c', 3: 'd' });
  await stop(d);
});

test('removing a volume a session can see: SIGHUP and ctl reload refuse naming the session; --force removes it and the session gets 25/00', async (t) => {
  const w = workdir(t);
  makeFiles(w, ['a', 'b']);
  w.writeConfig(baseConfig(w, ['a', 'b'].map(fileVolume)));
  const { d, port, socket } = await start(t, w);
  const s: Connection = await login(port, { initiatorName: 'iqn.2026-11.io.rblk:user-of-b' });
  t.teardown(() => s.close());
  t.deepEqual(await reportLuns(s), [0, 1]);
  const [info] = (await controlRequest(socket, 'sessions')) as { id: string; peer: string }[];
  const named = new RegExp(
    `^volume b \\(LUN 1\\) is in use by 1 session: ${info!.id} \\(iqn\\.2026-11\\.io\\.rblk:user-of-b from ${info!.peer.replace(/[.]/g, '\\.')}\\); ` +
      'log them out first \\(rblkd ctl kick ID, or on the initiator\\), or run rblkd ctl reload --force to remove it under them \\(their commands to LUN 1 then fail with LOGICAL UNIT NOT SUPPORTED\\)$',
  );

  w.writeConfig(baseConfig(w, ['a'].map(fileVolume)));
  // SIGHUP has no --force: refused and logged.
  let mark = d.lines.length;
  d.kill('SIGHUP');
  await d.waitForLine(/error: reload refused, still serving the previous configuration: 1 volume to remove is in use/, mark);
  const line = (await d.waitForLine(/error: volume b \(LUN 1\) is in use.*/, mark))[0].replace(/^.*?error: /, '');
  t.regex(line, named);

  const cli = await ctl(['reload', '--socket', socket]);
  t.is(cli.code, 1, cli.stderr);
  t.regex(cli.stdout.split('\n')[2]?.trim() ?? '', named, cli.stdout);
  const refused = (await controlRequest(socket, 'reload')) as ReloadResult;
  t.false(refused.applied);
  t.regex(refused.errors[1] ?? '', named);
  t.deepEqual(refused.inUse, [{ volume: 'b', lun: 1, sessions: [{ id: info!.id, initiator: 'iqn.2026-11.io.rblk:user-of-b', peer: info!.peer }] }]);
  t.true((await read(s, 1, 0, 8)).data.equals(pattern(MiB, SEED.b!).subarray(0, 4096)), 'b is still served');

  mark = d.lines.length;
  const run = await ctl(['reload', '--force', '--json', '--socket', socket]);
  t.is(run.code, 0, run.stderr);
  const forced = JSON.parse(run.stdout) as ReloadResult;
  t.deepEqual([forced.applied, forced.removed, forced.errors], [true, ['b'], []], JSON.stringify(forced));
  t.is(forced.inUse[0]?.sessions[0]?.id, info!.id);
  await d.waitForLine(/warn: reload --force: volume b \(LUN 1\) is in use by 1 session: .*; removing it under them/, mark);
  const gone = await read(s, 1, 0, 1);
  t.deepEqual(senseOf(gone.result), { key: 5, asc: 0x25, ascq: 0 }, 'the session sees LOGICAL UNIT NOT SUPPORTED on LUN 1');
  t.deepEqual(await reportLuns(s), [0]);
  t.true((await read(s, 0, 0, 8)).data.equals(pattern(MiB, SEED.a!).subarray(0, 4096)), 'a is untouched');

  // Without sessions no force is needed; a bad argument is refused.
  await s.logout();
  await t.throwsAsync(controlRequest(socket, 'reload', ['yes']), { message: 'reload takes no argument, or "force"' });
  await stop(d);
});

test('adding a read-only volume whose file does not exist: refused saying what is missing and what to do; rblkd keeps serving', async (t) => {
  const w = workdir(t);
  makeFiles(w, ['a']);
  w.writeConfig(baseConfig(w, ['a'].map(fileVolume)));
  const { d, port, socket } = await start(t, w);
  const missing = join(w.dir, 'golden.img');
  w.writeConfig(baseConfig(w, [fileVolume('a'), { name: 'golden', path: missing, read_only: true }]));
  const r = (await controlRequest(socket, 'reload')) as ReloadResult;
  t.false(r.applied);
  t.is(r.errors.length, 2, JSON.stringify(r.errors));
  t.true(r.errors[1]!.endsWith(`volumes[1].path: ${missing} does not exist, and a read_only volume is never created (create it, or drop read_only)`), r.errors[1]);
  t.notRegex(r.errors.join('\n'), /ENOENT/);
  t.deepEqual(await lunMap(port, socket), { 0: 'a' }, 'still serving a');

  // Once the file is there, the same file applies.
  writeFileSync(missing, pattern(MiB, SEED.d!));
  t.true(((await controlRequest(socket, 'reload')) as ReloadResult).applied);
  t.deepEqual(await lunMap(port, socket), { 0: 'a', 1: 'd' });
  await stop(d);
});

test('an iSCSI session counts as well: removing what it can see is refused naming it; removing what its ACL hides is not', async (t) => {
  const w = workdir(t);
  const target = 'iqn.2026-12.io.rblk:changes';
  const reader = 'iqn.2026-12.io.rblk:reader';
  const shared = { name: 'shared', memory: true, size: '1MiB', acl: [{ initiator: reader, access: 'ro' }] };
  const hidden = { name: 'hidden', memory: true, size: '1MiB', acl: [{ initiator: 'iqn.2026-12.io.rblk:other', access: 'rw' }] };
  const listeners = [
    { provider: 'tcp', address: '127.0.0.1', port: 0 },
    { protocol: 'iscsi', address: '127.0.0.1', port: 0 },
  ];
  w.writeConfig(baseConfig(w, [shared, hidden], { target_name: target, listeners }));
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const port = await d.iscsiPort();
  await d.waitForLine(/rblkd ready/);
  const socket = join(w.dir, 'rblkd.ctl');
  const c = await RawInitiator.open(port);
  t.teardown(() => c.close());
  const r = await c.login({ initiator: reader, target });
  t.is(r ? loginStatus(r) : -1, 0);

  w.writeConfig(baseConfig(w, [shared], { target_name: target, listeners }));
  const hiddenGone = (await controlRequest(socket, 'reload')) as ReloadResult;
  t.deepEqual([hiddenGone.applied, hiddenGone.removed, hiddenGone.inUse], [true, ['hidden'], []], JSON.stringify(hiddenGone));

  w.writeConfig(baseConfig(w, [], { target_name: target, listeners }));
  const refused = (await controlRequest(socket, 'reload')) as ReloadResult;
  t.false(refused.applied);
  t.deepEqual(refused.inUse.map((u) => [u.volume, u.lun, u.sessions.map((s) => s.initiator)]), [['shared', 0, [reader]]]);
  t.regex(refused.errors[1] ?? '', /^volume shared \(LUN 0\) is in use by 1 session: \S+ \(iqn\.2026-12\.io\.rblk:reader from 127\.0\.0\.1:\d+\); /);
  // What the operator reads after forcing it.
  const forced = await ctl(['reload', '--force', '--socket', socket]);
  t.is(forced.code, 0, forced.stderr);
  t.regex(forced.stdout, /^reloaded\nremoved: shared\nremoved under 1 session\(s\): shared \(LUN 0\): \S+ iqn\.2026-12\.io\.rblk:reader 127\.0\.0\.1:\d+\n$/);
  c.close();
  await stop(d);
});

test('rblkd ctl create, resize and delete write volumes.d beside the config and reload; a refused change is undone; the main file is never rewritten', async (t) => {
  const w = workdir(t);
  makeFiles(w, ['a', 'b']);
  w.writeConfig(baseConfig(w, ['a'].map(fileVolume)));
  const mainBefore = readFileSync(w.configPath, 'utf8');
  const { d, port, socket } = await start(t, w);
  const dropIn = join(w.dir, 'volumes.d', 'b.yaml');
  const run = (args: string[]): ReturnType<typeof ctl> => ctl([...args, '--config', w.configPath]);

  const created = await run(['create', 'b', '--path', join(w.state, 'b.img')]);
  t.is(created.code, 0, created.stderr + created.stdout);
  t.true(created.stdout.startsWith(`created ${dropIn}`), created.stdout);
  t.true(existsSync(dropIn));
  t.deepEqual(await lunMap(port, socket), { 0: 'a', 1: 'b' });

  const again = await run(['create', 'b', '--memory', '--size', '1MiB']);
  t.is(again.code, 1);
  t.regex(again.stderr, /a volume named b is already defined in .*volumes\.d\/b\.yaml/);

  // A change the config check refuses never reaches the daemon, and leaves no file behind.
  const missing = await run(['create', 'c', '--path', join(w.state, 'nope.img'), '--read-only']);
  t.is(missing.code, 1);
  t.regex(missing.stderr, /not changed, the config would be refused:\n.*volumes\.d\/c\.yaml:\d+: volumes\[0\]\.path/);
  t.false(existsSync(join(w.dir, 'volumes.d', 'c.yaml')));

  const mainVolume = await run(['resize', 'a', '2MiB']);
  t.is(mainVolume.code, 1);
  t.regex(mainVolume.stderr, /volume a is defined in .*rblkd\.yaml, which rblkd ctl does not rewrite \(it keeps your comments\): resize it there, then rblkd ctl reload/);

  const grown = await run(['resize', 'b', '2MiB']);
  t.is(grown.code, 0, grown.stderr + grown.stdout);
  t.is(((await controlRequest(socket, 'volumes')) as { name: string; size: number }[]).find((v) => v.name === 'b')?.size, 2 * MiB);

  // QoS limits set and cleared the same way, live.
  const qosOf = async (): Promise<Record<string, number> | undefined> => ((await controlRequest(socket, 'volumes')) as { name: string; qos?: { limits: Record<string, number> } }[]).find((v) => v.name === 'b')?.qos?.limits;
  const limited = await run(['qos', 'b', '--iops', '500', '--write-bps', '4MiB']);
  t.is(limited.code, 0, limited.stderr + limited.stdout);
  t.deepEqual(await qosOf(), { iops: 500, write_bps: 4 * MiB });
  t.regex(readFileSync(dropIn, 'utf8'), /qos:\s*\n\s+iops: 500\n\s+write_bps: 4MiB/);
  const noSource = await run(['create', 'c2', '--size', '1MiB']);
  t.is(noSource.code, 64, 'a bad command line');
  t.regex(noSource.stderr, /create needs exactly one of --path, --rbd POOL\/IMAGE and --memory/);
  const noLimit = await run(['qos', 'b']);
  t.is(noLimit.code, 64);
  const notNumber = await run(['qos', 'b', '--iops', 'abc']);
  t.is(notNumber.code, 64, 'a bad command line');
  t.regex(notNumber.stderr, /--iops needs a number/);
  const bad = await run(['qos', 'b', '--bps', '10']);
  t.is(bad.code, 1);
  t.regex(bad.stderr, /not changed, the config would be refused:\n.*volumes\.d\/b\.yaml:\d+: volumes\[0\]\.qos\.bps/);
  t.deepEqual(await qosOf(), { iops: 500, write_bps: 4 * MiB }, 'a refused change leaves the limits');
  t.is((await run(['qos', 'b', '--clear'])).code, 0);
  t.deepEqual(await qosOf() ?? {}, {});

  // Deleting a volume a session sees is refused (and the file is put back) unless --force.
  const s: Connection = await login(port, { initiatorName: 'iqn.2026-11.io.rblk:user-of-b' });
  t.teardown(() => s.close());
  const before = readFileSync(dropIn, 'utf8');
  const refused = await run(['delete', 'b']);
  t.is(refused.code, 1);
  t.regex(refused.stdout, /^not changed:/);
  // With the file put back, a reload --force would remove nothing: the way on it names is this command's own.
  t.regex(refused.stdout, /or run rblkd ctl delete b --force to remove it under them/);
  t.notRegex(refused.stdout, /reload --force/);
  t.is(readFileSync(dropIn, 'utf8'), before, 'the file is back as it was');
  const forced = await run(['delete', 'b', '--force']);
  t.is(forced.code, 0, forced.stderr + forced.stdout);
  t.false(existsSync(dropIn));
  await s.close();
  await gone(socket, 'iqn.2026-11.io.rblk:user-of-b');
  t.deepEqual(await lunMap(port, socket), { 0: 'a' });
  t.is(readFileSync(w.configPath, 'utf8'), mainBefore, 'rblkd.yaml untouched');
  await stop(d);
});
