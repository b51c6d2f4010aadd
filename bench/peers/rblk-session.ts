// rblk without the daemon and the library: a raw initiator Connection (one
// logged-in connection, READ(16)/WRITE(16) with registered buffers the target
// RDMA-writes and -reads) against a TargetServer in a child process
// (rblk-target.ts). It measures the session layer, the transport and the
// file backend; the gap to the "rblk library" rows is what the library adds.
import { Connection } from '../../initiator/connection.js';
import { FabricInitiatorTransport } from '../../initiator/transport/fabric-transport.js';
import type { IoBuffer } from '../../initiator/transport/transport.js';
import * as cdb from '../../protocol/scsi/cdb.js';
import { decodeSense } from '../../protocol/scsi/sense.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { endDaemon, nodeScript, scriptExists, startDaemon, stopDaemon, waitForLine, type Daemon } from './children.js';
import { CpuMeter } from './cpu.js';
import { runLoop } from './load-loop.js';
import { isRead, type BenchContext, type Measurement, type SystemInfo, type SystemResult } from './workload.js';

const TARGET_NAME = 'iqn.2026-11.io.rblk:bench-target';
const LUN = 0;

export function sessionSystem(provider: string): SystemInfo {
  return { id: `rblk-session-${provider}`, label: `rblk session layer, ${provider} (raw Connection, no daemon)`, kind: 'rblk', driver: 'in-process loop, initiator/connection.ts' };
}

function senseText(sense: Buffer): string {
  const s = decodeSense(sense);
  return s ? `sense key ${s.key} ASC ${s.asc.toString(16)}h ASCQ ${s.ascq.toString(16)}h` : 'no sense';
}

/** TEST UNIT READY until GOOD: the first command of a session sees the power-on unit attention (SPC-5 6.2). */
async function settle(c: Connection): Promise<void> {
  for (let i = 0; i < 5; i++) {
    const r = await c.command({ lun: LUN, cdb: cdb.testUnitReady() });
    if (r.status === ScsiStatus.GOOD) return;
  }
  throw new Error('TEST UNIT READY never answered GOOD');
}

async function measure(ctx: BenchContext, c: Connection, provider: string, targetPid: number): Promise<Measurement[]> {
  const out: Measurement[] = [];
  for (const w of ctx.workloads) {
    ctx.progress(`rblk session ${provider}: ${w.label}`);
    const bufs: IoBuffer[] = [];
    for (let i = 0; i < w.queueDepth; i++) {
      const b = await c.allocate(w.blockSize);
      b.buffer.fill(0xa5 ^ i);
      bufs.push(b);
    }
    try {
      const blocks = w.blockSize / ctx.lbaSize;
      const read = isRead(w);
      const meter = new CpuMeter([
        { name: 'bench (Connection)', side: 'client', pid: process.pid },
        { name: 'rblk-target', side: 'server', pid: targetPid },
      ]);
      const r = await runLoop(w, ctx.fileSize, ctx.seconds, async (slot, offset) => {
        const lba = offset / ctx.lbaSize;
        const res = read
          ? await c.command({ lun: LUN, cdb: cdb.read16(lba, blocks), dataIn: bufs[slot] })
          : await c.command({ lun: LUN, cdb: cdb.write16(lba, blocks), dataOut: bufs[slot] });
        if (res.status !== ScsiStatus.GOOD) throw new Error(`${read ? 'READ' : 'WRITE'}(16) at LBA ${lba}: status ${res.status}, ${senseText(res.sense)}`);
      });
      out.push({ workload: w.id, ...r, cpu: meter.stop() });
    } finally {
      for (const b of bufs) b.release();
    }
  }
  return out;
}

export async function runRblkSession(ctx: BenchContext, provider: string): Promise<SystemResult> {
  const system = sessionSystem(provider);
  if (!scriptExists('bench/peers/rblk-target')) return { system, measurements: [], unavailable: `${nodeScript('bench/peers/rblk-target').path} is missing (build first)` };
  const s = nodeScript('bench/peers/rblk-target');
  const d: Daemon = startDaemon(process.execPath, [...s.args, provider, ctx.file, String(ctx.lbaSize), TARGET_NAME]);
  let port: number;
  try {
    port = Number((await waitForLine(d, 'stdout', /^\{"port":(\d+)\}/))[1]);
  } catch (e) {
    await stopDaemon(d, 'SIGKILL');
    return { system, measurements: [], unavailable: `rblk-target did not start: ${(e as Error).message}` };
  }
  let c: Connection | null = null;
  try {
    // One credit stays in reserve for task management (connection.ts), so ask for more than the deepest workload.
    const depth = Math.max(...ctx.workloads.map((w) => w.queueDepth)) * 2;
    c = await Connection.open(new FabricInitiatorTransport(), {
      address: '127.0.0.1',
      port,
      provider,
      initiatorName: 'iqn.2026-11.io.rblk:bench-initiator',
      targetName: TARGET_NAME,
      queueDepth: depth,
      maxIo: Math.max(...ctx.workloads.map((w) => w.blockSize)),
    });
    await settle(c);
    return { system, measurements: await measure(ctx, c, provider, d.pid) };
  } finally {
    if (c) await c.logout();
    await endDaemon(d);
  }
}
