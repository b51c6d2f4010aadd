// rblkd's iSCSI listener (protocol: iscsi in rblkd.yaml) serving the backing
// file, driven by iscsi-perf: the same client as the tgt row, so the two read
// as a like-for-like ratio. rblkd runs on its own here (only the iSCSI
// listener), so a build whose config does not know iSCSI yet fails this row
// alone, with rblkd's reason.
import { freePort, hasCommand } from './children.js';
import { measureIscsi } from './iscsi-perf.js';
import { launchRblkd, rblkProblem, stopRblkd } from './rblk.js';
import type { BenchContext, SystemInfo, SystemResult } from './workload.js';

const IQN = 'iqn.2026-11.io.rblk:bench-iscsi';
/** rblkd serves its one volume as LUN 0. */
const LUN = 0;

export const RBLK_ISCSI: SystemInfo = { id: 'rblk-iscsi', label: 'rblkd iSCSI listener (iSCSI/TCP, O_DIRECT)', kind: 'rblk', driver: 'iscsi-perf' };

export async function runRblkIscsi(ctx: BenchContext): Promise<SystemResult> {
  if (!hasCommand('iscsi-perf')) return { system: RBLK_ISCSI, measurements: [], unavailable: 'iscsi-perf is not installed (apt-get install libiscsi-bin)' };
  const problem = rblkProblem();
  if (problem !== null) return { system: RBLK_ISCSI, measurements: [], unavailable: problem };
  const port = await freePort();
  ctx.progress('starting rblkd (iscsi)');
  const d = await launchRblkd({ file: ctx.file, lbaSize: ctx.lbaSize, direct: true, providers: [], iscsiPort: port, targetName: IQN }).catch((e: Error) => e);
  if (d instanceof Error) return { system: RBLK_ISCSI, measurements: [], unavailable: `rblkd did not start with an iSCSI listener: ${d.message}` };
  try {
    return { system: RBLK_ISCSI, ...(await measureIscsi(ctx, `iscsi://127.0.0.1:${port}/${IQN}/${LUN}`, { name: 'rblkd', pid: d.d.pid })) };
  } finally {
    await stopRblkd(d);
  }
}
