// tgt (the Linux SCSI target framework's user-space daemon) serving the
// backing file as an iSCSI LUN over TCP (bs_rdwr, O_DIRECT like every other
// server here), driven by iscsi-perf. Starting and stopping tgtd is tgtd.ts.
import { hasCommand } from './children.js';
import { measureIscsi } from './iscsi-perf.js';
import { startTgtd, stopTgtd, type Tgtd } from './tgtd.js';
import type { BenchContext, SystemInfo, SystemResult } from './workload.js';

const IQN = 'iqn.2026-11.io.rblk:bench-tgt';

export const TGT: SystemInfo = { id: 'tgt', label: 'tgt (iSCSI/TCP, bs_rdwr, O_DIRECT)', kind: 'peer', driver: 'iscsi-perf' };

export async function runTgt(ctx: BenchContext): Promise<SystemResult> {
  for (const tool of ['tgtd', 'tgtadm', 'iscsi-perf'])
    if (!hasCommand(tool)) return { system: TGT, measurements: [], unavailable: `${tool} is not installed (apt-get install tgt libiscsi-bin)` };
  let t: Tgtd;
  try {
    t = await startTgtd({ file: ctx.file, iqn: IQN, direct: true });
  } catch (e) {
    return { system: TGT, measurements: [], unavailable: `tgtd did not start: ${(e as Error).message}` };
  }
  try {
    return { system: TGT, ...(await measureIscsi(ctx, t.url, { name: 'tgtd', pid: t.d.pid })) };
  } finally {
    await stopTgtd(t);
  }
}
