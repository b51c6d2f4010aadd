// The transport ceiling in JavaScript: one-sided RMA through native/fabric.ts with
// no capsules, no SCSI and no storage behind it, at each workload's size and
// depth. The bench plays the target, which moves the data in rblk: for a
// block read it RDMA-WRITEs into the initiator's memory, for a block write it
// RDMA-READs from it. bench/transport-peer.ts plays the initiator (a region
// open to remote access, in its own process), as in bench/transport.ts.
// It counts our addon and JavaScript as part of the limit; the report's
// ratios use the C ceiling (rma-ceiling.ts) instead, and this row stays to
// show what our own loop costs against it.
import { Domain, type Endpoint, type MemoryRegion } from '../../native/fabric.js';
import type { DataDescriptor } from '../../protocol/wire/index.js';
import { endDaemon, nodeScript, scriptExists, startDaemon, stopDaemon, waitForLine, type Daemon } from './children.js';
import { CpuMeter } from './cpu.js';
import { runLoop } from './load-loop.js';
import { isRead, type BenchContext, type Measurement, type SystemInfo, type SystemResult } from './workload.js';

const REGION = 64 << 20;

export function ceilingSystem(provider: string): SystemInfo {
  return { id: `ceiling-${provider}`, label: `transport ceiling (JS RMA loop), ${provider} (RMA, no storage)`, kind: 'transport-ceiling', driver: 'RMA loop (native/fabric.ts)' };
}

async function startPeer(provider: string): Promise<{ d: Daemon; port: number }> {
  const s = nodeScript('bench/transport-peer');
  const d = startDaemon(process.execPath, [...s.args, provider, String(REGION), '0']);
  try {
    const m = await waitForLine(d, 'stdout', /^\{"port":(\d+)\}/);
    return { d, port: Number(m[1]) };
  } catch (e) {
    await stopDaemon(d, 'SIGKILL');
    throw e;
  }
}

async function measure(ctx: BenchContext, provider: string, ep: Endpoint, domain: Domain, remote: DataDescriptor, peerPid: number): Promise<Measurement[]> {
  const out: Measurement[] = [];
  for (const w of ctx.workloads) {
    ctx.progress(`ceiling ${provider}: ${w.label}`);
    const local: MemoryRegion = domain.register(w.queueDepth * w.blockSize);
    try {
      const slices = Array.from({ length: w.queueDepth }, (_, i) => local.slice(i * w.blockSize, w.blockSize));
      const op = isRead(w) ? 'write' : 'read';
      const meter = new CpuMeter([
        { name: 'bench (RMA loop)', side: 'server', pid: process.pid },
        { name: 'transport peer', side: 'client', pid: peerPid },
      ]);
      const r = await runLoop(w, remote.length, ctx.seconds, async (slot, offset) => {
        const where: DataDescriptor = { address: remote.address + BigInt(offset), key: remote.key, length: w.blockSize };
        if (op === 'write') await ep.write(slices[slot], where);
        else await ep.read(slices[slot], where);
      });
      out.push({ workload: w.id, ...r, cpu: meter.stop(), note: `RMA ${op} of ${w.blockSize >> 10} KiB` });
    } finally {
      await local.close();
    }
  }
  return out;
}

export async function runCeiling(ctx: BenchContext, provider: string): Promise<SystemResult> {
  const system = ceilingSystem(provider);
  if (!scriptExists('bench/transport-peer')) return { system, measurements: [], unavailable: `${nodeScript('bench/transport-peer').path} is missing (build first)` };
  let peer: { d: Daemon; port: number };
  try {
    peer = await startPeer(provider);
  } catch (e) {
    return { system, measurements: [], unavailable: `the transport peer did not start: ${(e as Error).message}` };
  }
  const domain = Domain.open({ provider, address: '127.0.0.1' });
  try {
    const ep = await domain.connect({ address: '127.0.0.1', port: peer.port });
    const pd = ep.peerPrivateData;
    const remote: DataDescriptor = { address: pd.readBigUInt64BE(0), key: pd.readBigUInt64BE(8), length: pd.readUInt32BE(16) };
    const measurements = await measure(ctx, provider, ep, domain, remote, peer.d.pid);
    await ep.close();
    return { system, measurements };
  } finally {
    await domain.close();
    await endDaemon(peer.d);
  }
}
