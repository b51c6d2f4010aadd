import test from 'ava';
import { LoginError, type Connection } from '../../initiator/connection.js';
import * as cdb from '../../protocol/scsi/cdb.js';
import { findModePage, modeSelectList10, parseCachingPage, parseModeSense10 } from '../../protocol/scsi/mode.js';
import { ModePage, PrOutAction } from '../../protocol/scsi/opcodes.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { baseConfig, spawnDaemon, workdir, type Workdir } from './helpers/daemon-process.js';
import { command, login, pattern, read, reportLuns, senseOf, write } from './helpers/initiator.js';

const SECRETS = {
  'host-a': 'secret-for-host-a-0001',
  'backup-01': 'secret-for-backup-01-x',
  other: 'secret-for-the-other-one',
};

function config(w: Workdir, o: { backupAcl?: boolean; hostASecret?: string } = {}): Record<string, unknown> {
  return baseConfig(
    w,
    [
      { name: 'open', memory: true, size: '1MiB', lun: 0 },
      {
        name: 'private',
        memory: true,
        size: '1MiB',
        lun: 1,
        acl: [{ initiator: 'host-a', access: 'rw' }, ...(o.backupAcl === false ? [] : [{ initiator: 'backup-*', access: 'ro' }])],
      },
    ],
    {
      auth: {
        required: true,
        initiators: Object.entries({ ...SECRETS, 'host-a': o.hostASecret ?? SECRETS['host-a'] }).map(([name, secret]) => ({ name, secret })),
      },
    },
  );
}

async function loginRefusal(port: number, initiatorName: string, secret?: string): Promise<LoginError> {
  const e = await login(port, { initiatorName, ...(secret !== undefined ? { secret } : {}) }).then(
    async (c: Connection) => {
      await c.close();
      return new Error(`${initiatorName} logged in`);
    },
    (err: unknown) => err,
  );
  if (!(e instanceof LoginError)) throw e;
  return e;
}

test('ACLs hide and cap volumes, authentication refuses wrong secrets, and a reload changes both for new logins', async (t) => {
  const w = workdir(t);
  w.writeConfig(config(w));
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const port = await d.port();
  const data = pattern(512, 3);

  const a = await login(port, { initiatorName: 'host-a', secret: SECRETS['host-a'] });
  t.teardown(() => a.close());
  t.deepEqual(await reportLuns(a), [0, 1]);
  t.is((await write(a, 1, 0, data)).status, ScsiStatus.GOOD);

  const backup = await login(port, { initiatorName: 'backup-01', secret: SECRETS['backup-01'] });
  t.teardown(() => backup.close());
  t.deepEqual(await reportLuns(backup), [0, 1]);
  const refused = await write(backup, 1, 0, pattern(512, 4));
  t.is(refused.status, ScsiStatus.CHECK_CONDITION);
  t.deepEqual(senseOf(refused), { key: 7, asc: 0x27, ascq: 0 }, 'read-only ACL: WRITE PROTECTED');
  const got = await read(backup, 1, 0, 1);
  t.true(got.data.equals(data), 'ro can read, and the refused write changed nothing');
  t.is((await write(backup, 0, 0, data)).status, ScsiStatus.GOOD, 'the open volume is rw');

  // MODE SELECT from the read-only initiator would turn the write cache off and switch the
  // sense format for everyone: refused, and host-a still sees WCE on and fixed-format sense.
  const cachingOff = modeSelectList10([Buffer.from([0x08, 0x12, ...Buffer.alloc(18)])]);
  const modeSelect = await command(backup, { lun: 1, cdb: cdb.modeSelect10(cachingOff.length), dataOut: cachingOff });
  t.deepEqual(senseOf(modeSelect), { key: 7, asc: 0x27, ascq: 0 }, 'read-only ACL: MODE SELECT is WRITE PROTECTED');
  const pages = await a.allocate(255);
  t.teardown(() => pages.release());
  t.is((await command(a, { lun: 1, cdb: cdb.modeSense10({ page: ModePage.CACHING, allocationLength: 255, dbd: true }), dataIn: pages })).status, ScsiStatus.GOOD);
  t.true(parseCachingPage(findModePage(parseModeSense10(Buffer.from(pages.buffer)), ModePage.CACHING) ?? Buffer.alloc(0)).writeCacheEnabled, 'WCE still on');
  const reservation = await command(backup, { lun: 1, cdb: cdb.persistentReserveOut(PrOutAction.REGISTER), dataOut: cdb.prOutParameterList({ key: 0n, serviceActionKey: 1n }) });
  t.deepEqual(senseOf(reservation), { key: 7, asc: 0x27, ascq: 0 }, 'read-only ACL: PERSISTENT RESERVE OUT is WRITE PROTECTED');

  const other = await login(port, { initiatorName: 'other', secret: SECRETS.other });
  t.teardown(() => other.close());
  t.deepEqual(await reportLuns(other), [0], 'no ACL entry: the volume is not reported');
  t.deepEqual(senseOf((await read(other, 1, 0, 1)).result), { key: 5, asc: 0x25, ascq: 0 }, 'and its LUN is not supported');

  const wrong = await loginRefusal(port, 'host-a', 'not-the-secret-of-host-a');
  t.is(wrong.code, 'AUTH_FAILED');
  await d.waitForLine(/warn: login refused: authentication failed .* initiator=host-a/);
  // A name the target does not know is challenged like any other and refused at the proof (docs/protocol.md §10).
  const stranger = await loginRefusal(port, 'stranger', 'a-guess-at-some-secret');
  t.is(stranger.code, 'AUTH_FAILED');
  t.is(stranger.message, wrong.message, 'the same answer as a known name with a wrong secret');
  await d.waitForLine(/warn: login refused: authentication required and no secret is configured for this initiator .*initiator=stranger/);

  // Reload: backup-* loses the volume, host-a gets a new secret. New logins see it; the established session keeps its map.
  const mark = d.lines.length;
  w.writeConfig(config(w, { backupAcl: false, hostASecret: 'the-new-secret-of-host-a' }));
  d.kill('SIGHUP');
  await d.waitForLine(/info: reloaded: serving 2 volumes/, mark);
  const backup2 = await login(port, { initiatorName: 'backup-01', secret: SECRETS['backup-01'] });
  t.teardown(() => backup2.close());
  t.deepEqual(await reportLuns(backup2), [0]);
  t.deepEqual(await reportLuns(backup), [0, 1]);
  t.is((await loginRefusal(port, 'host-a', SECRETS['host-a'])).code, 'AUTH_FAILED', 'the old secret no longer works');
  const a2 = await login(port, { initiatorName: 'host-a', secret: 'the-new-secret-of-host-a' });
  t.teardown(() => a2.close());
  t.true((await read(a2, 1, 0, 1)).data.equals(data));

  for (const c of [a, a2, backup, backup2, other]) await c.logout();
  d.kill('SIGTERM');
  t.deepEqual(await d.exited, { code: 0, signal: null });
});
