// A fast subset of libiscsi's iscsi-test-cu against the iSCSI portal: the
// iSCSI families this front end owns (CmdSN window, task management, DataSN,
// residuals of reads and of a READ flagged W) and the basic SCSI I/O families
// through it, WRITE ATOMIC(16), EXTENDED COPY, and the multipath family (the URL twice: two
// sessions to one LU). The full
// `--test=ALL` run and its counts are in docs/iscsi.md "Compliance".
import test from 'ava';
import { existsSync } from 'node:fs';
import { INITIATOR, run, startIscsi, type IscsiFixture } from './portal-fixture.js';

const FAMILIES = [
  'iSCSI.iSCSIcmdsn.*',
  'iSCSI.iSCSITMF.*',
  'iSCSI.iSCSIResiduals.Read1?Residuals',
  'iSCSI.iSCSIResiduals.Read10Invalid',
  'iSCSI.iSCSIdatasn.*',
  'SCSI.TestUnitReady.*',
  'SCSI.ReadCapacity16.*',
  'SCSI.Read10.*',
  'SCSI.Write10.*',
  'SCSI.Inquiry.Standard',
  'SCSI.WriteAtomic16.*',
  'SCSI.MultipathIO.*',
  // After MultipathIO: its CompareAndWrite compares LBA 256 as zeros without writing it
  // (it zeroes 0..255), and ExtendedCopy.Simple leaves 'A' there.
  'SCSI.ExtendedCopy.*',
  'SCSI.ReceiveCopyResults.*',
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
    // The multipath family runs only with a URL per path; it skips (and passes) with one.
    const urls = family.startsWith('SCSI.MultipathIO') ? [f.url(), f.url()] : [f.url()];
    const r = await run('iscsi-test-cu', ['--dataloss', `--test=${family}`, '-i', INITIATOR, ...urls], 120_000);
    const ran = /tests\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)/.exec(r.stdout);
    t.truthy(ran, r.stdout.slice(-2000));
    t.true(Number(ran![2]) > 0, 'some tests ran');
    t.false(/\[SKIPPED\]/.test(r.stdout), 'nothing skipped');
    t.is(Number(ran![4]), 0, r.stdout.split('\n').filter((l) => /FAILED|CU_/.test(l)).join('\n'));
    t.is(r.code, 0);
  });
}
