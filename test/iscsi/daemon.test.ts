// The real rblkd with an iSCSI listener beside its rblk one (docs/iscsi.md,
// docs/operations.md "iSCSI"): the same volumes, LUNs, ACLs and read-only
// rules; SIGHUP adds a volume (REPORTED LUNS DATA HAS CHANGED); max_sessions
// counts iSCSI sessions; SIGTERM asks iSCSI initiators to log out and exits 0;
// the daemon's fds come back.
import test from 'ava';
import { join } from 'node:path';
import type { SessionInfo } from '../../target/connection/environment.js';
import { controlRequest } from '../../target/daemon/control-client.js';
import { resources } from '../helpers/resources.js';
import { baseConfig, spawnDaemon, workdir } from '../daemon/helpers/daemon-process.js';
import { run } from './portal-fixture.js';
import { loginStatus, RawInitiator } from './raw-initiator.js';

const TARGET = 'iqn.2026-12.io.rblk:daemon';
const WRITER = 'iqn.2026-12.io.rblk:writer';
const READER = 'iqn.2026-12.io.rblk:reader';

const volumes = [
  { name: 'shared', memory: true, size: '1MiB', lun: 0, acl: [{ initiator: WRITER, access: 'rw' }, { initiator: READER, access: 'ro' }] },
  { name: 'private', memory: true, size: '2MiB', lun: 1, acl: [{ initiator: WRITER, access: 'rw' }] },
];

function config(w: ReturnType<typeof workdir>, vols: Record<string, unknown>[], limits: Record<string, unknown> = {}): Record<string, unknown> {
  return baseConfig(w, vols, {
    target_name: TARGET,
    listeners: [
      { provider: 'tcp', address: '127.0.0.1', port: 0 },
      { protocol: 'iscsi', address: '127.0.0.1', port: 0 },
    ],
    limits: { max_sessions: 2, ...limits },
  });
}

async function rawSession(port: number, initiator: string): Promise<RawInitiator> {
  const c = await RawInitiator.open(port);
  const r = await c.login({ initiator, target: TARGET });
  if (!r || loginStatus(r) !== 0) throw new Error(`login refused: 0x${r ? loginStatus(r).toString(16) : 'closed'}`);
  c.command({ itt: 1, cdb: Buffer.alloc(16), edtl: 0 }); // takes the POWER ON unit attention
  await c.next(0x21);
  return c;
}

function tur(c: RawInitiator, itt: number): Promise<{ status: number; asc: number; ascq: number } | null> {
  c.command({ itt, cdb: Buffer.alloc(16), edtl: 0 });
  return c.next(0x21).then((r) => (r ? { status: r.bhs[3], asc: r.data[2 + 12] ?? 0, ascq: r.data[2 + 13] ?? 0 } : null));
}

test('iSCSI beside rblk: ACLs and read-only, reload, max_sessions, SIGTERM', async (t) => {
  const w = workdir(t);
  w.writeConfig(config(w, volumes));
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const port = await d.iscsiPort();
  await d.port();
  await d.waitForLine(/rblkd ready/);
  const pid = d.child.pid!;

  // LUN masking by initiator IQN.
  const asWriter = await run('iscsi-ls', ['-i', WRITER, '-s', `iscsi://127.0.0.1:${port}`]);
  t.regex(asWriter.stdout, /Lun:0\b[\s\S]*Lun:1\b/);
  const asReader = await run('iscsi-ls', ['-i', READER, '-s', `iscsi://127.0.0.1:${port}`]);
  t.regex(asReader.stdout, /Lun:0\b/);
  t.notRegex(asReader.stdout, /Lun:1\b/);
  const stranger = await run('iscsi-inq', ['-i', 'iqn.2026-12.io.rblk:stranger', `iscsi://127.0.0.1:${port}/${TARGET}/0`]);
  t.not(stranger.code, 0, 'an initiator that sees no volume is refused (0x0202)');
  await d.waitForLine(/status 0x0202/);
  const base = resources(pid);

  // The reader's access is read-only: WRITE(10) is DATA PROTECT.
  const reader = await rawSession(port, READER);
  const wcdb = Buffer.alloc(16);
  wcdb[0] = 0x2a;
  wcdb[8] = 1;
  reader.command({ itt: 2, cdb: wcdb, write: true, edtl: 512, data: Buffer.alloc(512) });
  const ro = await reader.next(0x21);
  t.is(ro!.bhs[3], 2);
  t.is(ro!.data[2 + 2] & 0x0f, 7, 'DATA PROTECT');

  // max_sessions 2: the reader and a writer; a third login is refused with 0x0302.
  const writer = await rawSession(port, WRITER);
  const third = await RawInitiator.open(port);
  const refused = await third.login({ initiator: WRITER, target: TARGET });
  t.is(loginStatus(refused!), 0x0302);
  await third.whenClosed;

  // rblkd ctl status counts both as sessions of the iSCSI listener, as max_sessions did.
  const socket = join(w.dir, 'rblkd.ctl');
  const status = (await controlRequest(socket, 'status')) as { listeners: { name: string; sessions: number; connections: number }[] };
  t.like(status.listeners.find((l) => l.name.startsWith('iscsi:')), { sessions: 2, connections: 2 });

  // SIGHUP adds a volume: the running sessions see REPORTED LUNS DATA HAS CHANGED.
  w.writeConfig(config(w, [...volumes, { name: 'added', memory: true, size: '1MiB', lun: 2 }]));
  d.kill('SIGHUP');
  await d.waitForLine(/reloaded \(added added\)/);
  const ua = await tur(writer, 3);
  t.deepEqual(ua, { status: 2, asc: 0x3f, ascq: 0x0e });
  // kick takes the id rblkd ctl sessions shows (iscsi:<ISID>:<TSIH>): the reader is logged out.
  const readerId = ((await controlRequest(socket, 'sessions')) as SessionInfo[]).find((s) => s.initiator === READER)!.id;
  t.regex(readerId, /^iscsi:[0-9a-f]{12}:\d+$/);
  await controlRequest(socket, 'kick', [readerId]);
  const asked = await reader.next(0x32, 10_000);
  t.is(asked?.bhs[36], 1, 'the kicked session is asked to log out (Async Message, event 1)');
  reader.close();
  await reader.whenClosed;
  const listed = await run('iscsi-ls', ['-i', WRITER, '-s', `iscsi://127.0.0.1:${port}`]);
  t.regex(listed.stdout, /Lun:2\b/);
  // Every connection but the writer's has given its fd back.
  for (let i = 0; i < 100 && resources(pid).fds > base.fds + 1; i++) await new Promise((r) => setTimeout(r, 20));
  t.true(resources(pid).fds <= base.fds + 1, `fds ${resources(pid).fds} > ${base.fds} + 1`);

  // SIGTERM: iSCSI sessions are asked to log out (Async Message, event 1), then closed; exit 0.
  d.kill('SIGTERM');
  const async = await writer.next(0x32, 10_000);
  t.truthy(async, 'an Async Message came');
  t.is(async!.bhs[36], 1, 'event 1: the target requests a logout');
  await writer.whenClosed;
  const exit = await d.exited;
  t.is(exit.code, 0);
});
