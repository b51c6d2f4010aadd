// nbdkit's file plugin serving the backing file over NBD on 127.0.0.1,
// driven by fio's nbd engine: the same client as for rblk attach's export.
// nbdkit 1.32 has no O_DIRECT option; cache=none is the nearest: it drops
// what it read or wrote from the page cache, so every I/O reaches the disk.
import { startDaemon, stopDaemon, freePort, hasCommand, waitForPort } from './children.js';
import { CpuMeter } from './cpu.js';
import { runFio } from './fio.js';
import type { BenchContext, Measurement, SystemInfo, SystemResult } from './workload.js';

export const NBDKIT: SystemInfo = { id: 'nbdkit', label: 'nbdkit file plugin (NBD/TCP, cache=none)', kind: 'peer', driver: 'fio --ioengine=nbd' };

export async function runNbdkit(ctx: BenchContext): Promise<SystemResult> {
  for (const tool of ['nbdkit', 'fio'])
    if (!hasCommand(tool)) return { system: NBDKIT, measurements: [], unavailable: `${tool} is not installed (apt-get install ${tool})` };
  const port = await freePort();
  const d = startDaemon('nbdkit', ['--foreground', '--exit-with-parent', '-p', String(port), '-i', '127.0.0.1', 'file', ctx.file, 'cache=none'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const measurements: Measurement[] = [];
  try {
    try {
      await waitForPort(port, d);
    } catch (e) {
      return { system: NBDKIT, measurements: [], unavailable: `nbdkit did not start: ${(e as Error).message}` };
    }
    for (const w of ctx.workloads) {
      ctx.progress(`nbdkit: ${w.label}`);
      const meter = new CpuMeter([{ name: 'nbdkit', side: 'server', pid: d.pid }]);
      const r = await runFio({ engine: 'nbd', uri: `nbd://127.0.0.1:${port}/` }, w, ctx.seconds);
      const cpu = meter.stop();
      if (r.cpuMs !== null) cpu.push({ process: 'fio', side: 'client', cpuMs: r.cpuMs });
      measurements.push({ workload: w.id, iops: r.iops, mbps: r.mbps, p50us: r.p50us, p99us: r.p99us, meanUs: r.meanUs, ios: r.ios, seconds: r.seconds, cpu });
    }
  } finally {
    await stopDaemon(d);
  }
  return { system: NBDKIT, measurements };
}
