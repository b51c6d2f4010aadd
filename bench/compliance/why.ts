// Why a test skips, in words for docs/compliance.md: iscsi-test-cu's own
// [SKIPPED] line says what it saw ("Logical unit is not removable"), not
// whether that is a gap. These say which skips are the environment of the
// issue's command line and which are commands rblkd deliberately does not
// implement (docs/target.md, "Not implemented").
import type { TestResult } from './results.js';

interface Why {
  readonly family: RegExp;
  readonly test?: RegExp;
  /** Matched against the [SKIPPED] reason. */
  readonly reason?: RegExp;
  readonly why: string;
}

const WHYS: readonly Why[] = [
  { family: /^Sanitize$/, why: 'iscsi-test-cu sends SANITIZE only with --allow-sanitize, which the issue\'s command line does not pass; rblkd does not implement SANITIZE (docs/target.md)' },
  { family: /.*/, reason: /not removable/i, why: 'rblkd\'s logical units are disks (INQUIRY RMB=0): medium removal and eject do not apply (SBC-4 5.15, 5.25)' },
  { family: /^ReadOnly$/, why: 'the run serves a read-write volume; the write-protected case is covered by test/scsi (read_only volumes)' },
  { family: /^ReadDefectData1[02]$/, why: 'READ DEFECT DATA (SBC-4 5.20) is not implemented: a file or volume has no defect list (docs/target.md)' },
  { family: /.*/, reason: /LBPPB < 2/, why: 'the run serves 512-byte physical blocks (physical_block_size: 512, see above), so the tests of a range inside one physical block do not apply; they run and pass at rblkd\'s default of 4096' },
  { family: /.*/, reason: /fully provisioned/i, why: 'the volume is fully provisioned (thin: false), so the thin-provisioning tests do not apply' },
  { family: /.*/, reason: /Task Management function/i, why: 'the iSCSI front end does not implement this task management function (target warm/cold reset)' },
];

export function whyNot(r: TestResult): string {
  for (const w of WHYS) {
    if (!w.family.test(r.family)) continue;
    if (w.test && !w.test.test(r.test)) continue;
    if (w.reason && !r.reasons.some((x) => w.reason!.test(x))) continue;
    return w.why;
  }
  return '';
}
