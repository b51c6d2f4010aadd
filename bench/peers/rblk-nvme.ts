// rblkd's NVMe/TCP listener (protocol: nvme-tcp in rblkd.yaml) serving the
// backing file, driven through the rblk library's NVMe/TCP host
// (initiator/nvme/, `connect('nvme+tcp://...')`) by the same in-process loop
// as the library row, beside the iSCSI listener row (rblk-iscsi.ts). rblkd
// runs on its own here (only the NVMe/TCP listener), so a build without the
// host or the listener fails this row alone, with the reason.
import { freePort, scriptExists } from './children.js';
import { CpuMeter } from './cpu.js';
import { runLoop } from './load-loop.js';
import { launchRblkd, rblkProblem, stopRblkd } from './rblk.js';
import { isRead, type BenchContext, type Measurement, type SystemInfo, type SystemResult } from './workload.js';

type Library = typeof import('../../initiator/index.js');

const NQN = 'nqn.2026-11.io.rblk:bench-nvme';

export const RBLK_NVME: SystemInfo = { id: 'rblk-nvme', label: 'rblkd NVMe/TCP listener ← rblk library NVMe/TCP host (O_DIRECT)', kind: 'rblk', driver: 'in-process loop, rblk library nvme+tcp://' };

export async function runRblkNvme(ctx: BenchContext): Promise<SystemResult> {
  const problem = rblkProblem() ?? (scriptExists('initiator/nvme/session') ? null : 'not available yet: initiator/nvme/session does not exist');
  if (problem !== null) return { system: RBLK_NVME, measurements: [], unavailable: problem };
  const port = await freePort();
  ctx.progress('starting rblkd (nvme-tcp)');
  const d = await launchRblkd({ file: ctx.file, lbaSize: ctx.lbaSize, direct: true, providers: [], nvmePort: port, nqn: NQN }).catch((e: Error) => e);
  if (d instanceof Error) return { system: RBLK_NVME, measurements: [], unavailable: `rblkd did not start with an NVMe/TCP listener: ${d.message}` };
  const measurements: Measurement[] = [];
  try {
    const lib: Library = await import('../../initiator/index.js');
    const depth = Math.max(...ctx.workloads.map((w) => w.queueDepth));
    // Four I/O queues (the default), each deep enough that the deepest workload never waits for an entry.
    const session = await lib.connectNvme(`nvme+tcp://127.0.0.1:${port}/${NQN}`, { queueDepth: depth + 1 });
    try {
      const vol = await session.open(1);
      for (const w of ctx.workloads) {
        ctx.progress(`rblk NVMe/TCP host: ${w.label}`);
        const bufs = Array.from({ length: w.queueDepth }, (_, i) => Buffer.alloc(w.blockSize, 0x5a ^ i));
        const read = isRead(w);
        const meter = new CpuMeter([
          { name: 'bench (library)', side: 'client', pid: process.pid },
          { name: 'rblkd', side: 'server', pid: d.d.pid },
        ]);
        const r = await runLoop(w, Math.min(vol.size, ctx.fileSize), ctx.seconds, async (slot, offset) => {
          if (read) await vol.read(offset, bufs[slot]);
          else await vol.write(offset, bufs[slot]);
        });
        measurements.push({ workload: w.id, ...r, cpu: meter.stop() });
      }
      vol.close();
    } finally {
      await session.close();
    }
  } finally {
    await stopRblkd(d);
  }
  return { system: RBLK_NVME, measurements };
}
