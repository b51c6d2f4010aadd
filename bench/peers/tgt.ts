// tgt (the Linux SCSI target framework's user-space daemon) serving the
// backing file as an iSCSI LUN over TCP (bs_rdwr, O_DIRECT like every other
// server here), driven by iscsi-perf. Starting and stopping tgtd is tgtd.ts.
import { hasCommand } from './children.js';
import { CpuMeter } from './cpu.js';
import { runIscsiPerf } from './iscsi-perf.js';
import { startTgtd, stopTgtd, type Tgtd } from './tgtd.js';
import { isRandom, isRead, type BenchContext, type Measurement, type SystemInfo, type SystemResult } from './workload.js';

const IQN = 'iqn.2026-11.io.rblk:bench-tgt';

export const TGT: SystemInfo = { id: 'tgt', label: 'tgt (iSCSI/TCP, bs_rdwr, O_DIRECT)', kind: 'peer', driver: 'iscsi-perf' };

export async function runTgt(ctx: BenchContext): Promise<SystemResult> {
  for (const tool of ['tgtd', 'tgtadm', 'iscsi-perf'])
    if (!hasCommand(tool)) return { system: TGT, measurements: [], unavailable: `${tool} is not installed (apt-get install tgt libiscsi-bin)` };
  const skipped: Record<string, string> = {};
  const measurements: Measurement[] = [];
  let t: Tgtd;
  try {
    t = await startTgtd({ file: ctx.file, iqn: IQN, direct: true });
  } catch (e) {
    return { system: TGT, measurements: [], unavailable: `tgtd did not start: ${(e as Error).message}` };
  }
  try {
    for (const w of ctx.workloads) {
      if (!isRead(w)) {
        skipped[w.id] = 'iscsi-perf only reads';
        continue;
      }
      ctx.progress(`tgt: ${w.label}`);
      const meter = new CpuMeter([{ name: 'tgtd', side: 'server', pid: t.d.pid }]);
      const r = await runIscsiPerf({
        url: t.url,
        blocks: w.blockSize / ctx.lbaSize,
        blockBytes: ctx.lbaSize,
        queueDepth: w.queueDepth,
        seconds: ctx.seconds,
        random: isRandom(w),
      });
      const cpu = meter.stop();
      if (r.cpuMs !== null) cpu.push({ process: 'iscsi-perf', side: 'client', cpuMs: r.cpuMs });
      measurements.push({
        workload: w.id,
        iops: r.iops,
        mbps: r.mbps,
        meanUs: r.meanUs,
        ios: r.ios,
        seconds: r.seconds,
        cpu,
        note: 'mean latency from Little\'s law; iscsi-perf reports no percentiles',
      });
    }
  } finally {
    await stopTgtd(t);
  }
  return { system: TGT, measurements, skipped };
}
