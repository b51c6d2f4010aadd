// Software write protect (the Control mode page's SWP, SPC-5 7.5.8) on a
// volume whose READs and WRITEs run on the native fast path: the MODE SELECT
// that sets it holds the LU's fast-path gate, and the fast path is published
// again without write access, so a WRITE that arrives next is answered by
// JavaScript with DATA PROTECT, LOGICAL UNIT SOFTWARE WRITE PROTECTED (27/02)
// and changes nothing, while READs stay native. Clearing it gives the
// writes back to the fast path (docs/target.md "Access by command").
import test from 'ava';
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { FastPath } from '../../native/fast-path.js';
import * as cdb from '../../protocol/scsi/cdb.js';
import { findModePage, modeSelectList6, parseControlPage, parseModeSense6 } from '../../protocol/scsi/mode.js';
import { ModePage } from '../../protocol/scsi/opcodes.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { FileBackend } from '../../target/backend/file.js';
import { rblkConnections, type RblkConnection } from '../../target/rblk/connection.js';
import { LogicalUnit } from '../../target/scsi/index.js';
import { TargetServer } from '../../target/server.js';
import { command, login, pattern, read, senseOf, write } from '../daemon/helpers/initiator.js';
import { tempDir } from '../fuse/helpers/fuse-fixture.js';
import { listenTest, memoryLog, TARGET_NAME, testServerOptions } from '../helpers/target-fixture.js';

const reason = FastPath.available() ? null : 'no native fast path on this host (rblk_uring.node)';
(reason === null ? test : test.skip)(`SWP set by MODE SELECT takes writes off the fast path and refuses them with 27/02; reads stay native; clearing it gives writes back${reason === null ? '' : ` (skipped: ${reason})`}`, async (t) => {
  const dir = await tempDir(t, 'swp');
  const path = join(dir, 'vol');
  const backend = await FileBackend.open({ path, size: 1 << 20 });
  const server = new TargetServer(testServerOptions(memoryLog(), { fastPath: true }), rblkConnections);
  server.addVolume({ name: 'vol', lun: 0, lu: new LogicalUnit({ name: 'vol', backend, identifier: randomUUID() }), access: () => 'rw' });
  const port = (await listenTest(server, 'tcp')).port;
  t.teardown(async () => {
    await server.close();
    await backend.close();
  });
  const taken = (): number => [...server.sessions].reduce((a, s) => a + ((s as RblkConnection).fastPathStats?.taken ?? 0), 0);
  const a = await login(port, { targetName: TARGET_NAME, initiatorName: 'iqn.2026-12.io.rblk:swp-a' });
  t.teardown(() => a.close());
  const b = await login(port, { targetName: TARGET_NAME, initiatorName: 'iqn.2026-12.io.rblk:swp-b' });
  t.teardown(() => b.close());
  const before = pattern(4096, 1);
  t.is((await write(a, 0, 8, before)).status, ScsiStatus.GOOD); // the login's unit attention first, through JavaScript
  let n = taken();
  t.is((await write(a, 0, 8, before)).status, ScsiStatus.GOOD);
  t.is((await write(b, 0, 16, before)).status, ScsiStatus.GOOD);
  t.is(taken() - n, 2, 'both sessions write natively');

  const control = async (): Promise<Buffer> => {
    const buf = await a.allocate(255);
    try {
      const r = await command(a, { lun: 0, cdb: cdb.modeSense6({ page: ModePage.CONTROL, allocationLength: 255 }), dataIn: buf });
      t.is(r.status, ScsiStatus.GOOD);
      return Buffer.from(findModePage(parseModeSense6(Buffer.from(buf.buffer)), ModePage.CONTROL) ?? Buffer.alloc(0));
    } finally {
      buf.release();
    }
  };
  const setSwp = async (on: boolean): Promise<void> => {
    const page = await control();
    page[4] = on ? page[4] | 0x08 : page[4] & ~0x08;
    const list = modeSelectList6([page]);
    t.is((await command(a, { lun: 0, cdb: cdb.modeSelect6(list.length), dataOut: list })).status, ScsiStatus.GOOD, `MODE SELECT SWP=${on ? 1 : 0}`);
  };

  await setSwp(true);
  t.true(parseControlPage(await control()).softwareWriteProtect);
  const attentions: { key: number; asc: number; ascq: number }[] = [];
  n = taken();
  const refusedA = await write(a, 0, 8, pattern(4096, 2));
  const refusedB = await write(b, 0, 16, pattern(4096, 3), {}, attentions);
  t.deepEqual(attentions, [{ key: 6, asc: 0x2a, ascq: 0x01 }], 'the other session hears MODE PARAMETERS CHANGED');
  for (const r of [refusedA, refusedB]) {
    t.is(r.status, ScsiStatus.CHECK_CONDITION);
    t.deepEqual(senseOf(r), { key: 7, asc: 0x27, ascq: 0x02 }, 'LOGICAL UNIT SOFTWARE WRITE PROTECTED');
  }
  t.is(taken() - n, 0, 'the refused writes were not taken natively');
  const file = await readFile(path);
  t.true(file.subarray(8 * 512, 8 * 512 + 4096).equals(before) && file.subarray(16 * 512, 16 * 512 + 4096).equals(before), 'the refused writes changed nothing');
  n = taken();
  const got = await read(b, 0, 8, 8);
  t.is(got.result.status, ScsiStatus.GOOD);
  t.true(got.data.equals(before));
  t.is(taken() - n, 1, 'reads stay native');

  await setSwp(false);
  n = taken();
  t.is((await write(a, 0, 8, pattern(4096, 4))).status, ScsiStatus.GOOD);
  t.is((await write(b, 0, 16, pattern(4096, 5), {}, attentions)).status, ScsiStatus.GOOD);
  t.is(attentions.length, 2, 'the other session heard of the change back too');
  t.is(taken() - n, 2, 'both sessions write natively again (the unit attention was answered through JavaScript, the retry natively)');
  t.true((await readFile(path)).subarray(8 * 512, 8 * 512 + 4096).equals(pattern(4096, 4)));
});
