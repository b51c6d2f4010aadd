// A fast subset of libiscsi's iscsi-test-cu against the iSCSI portal: the
// iSCSI families this front end owns (CmdSN window, task management,
// residuals of reads) and the basic SCSI I/O families through it. The full
// `--test=ALL` run and its counts are in docs/iscsi.md "Compliance".
import test from 'ava';
import { existsSync } from 'node:fs';
import { INITIATOR, run, startIscsi, type IscsiFixture } from './portal-fixture.js';

const FAMILIES = [
  'iSCSI.iSCSIcmdsn.*',
  'iSCSI.iSCSITMF.*',
  'iSCSI.iSCSIResiduals.Read1?Residuals',
  'SCSI.TestUnitReady.*',
  'SCSI.ReadCapacity16.*',
  'SCSI.Read10.*',
  'SCSI.Write10.*',
  'SCSI.Inquiry.Standard',
];

let f: IscsiFixture;
test.before(async () => {
  f = await startIscsi([{ name: 'vol0', lun: 0, size: 16 << 20 }]);
});
test.after.always(async () => {
  await f?.close();
});

const have = existsSync('/usr/bin/iscsi-test-cu');
for (const family of FAMILIES) {
  (have ? test.serial : test.skip)(`iscsi-test-cu ${family}`, async (t) => {
    const r = await run('iscsi-test-cu', ['--dataloss', `--test=${family}`, '-i', INITIATOR, f.url()], 120_000);
    const ran = /tests\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)/.exec(r.stdout);
    t.truthy(ran, r.stdout.slice(-2000));
    t.true(Number(ran![2]) > 0, 'some tests ran');
    t.is(Number(ran![4]), 0, r.stdout.split('\n').filter((l) => /FAILED|CU_/.test(l)).join('\n'));
    t.is(r.code, 0);
  });
}
