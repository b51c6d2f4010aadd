// iscsi-perf (libiscsi-bin) as the load generator for the iSCSI rows (tgt,
// and rblkd's iSCSI listener: the same client on both). It only reads
// (READ(16)), keeps -m commands in flight, and prints one progress line per
// second separated by '\r', ending in "iops average N (M MB/s)" where M is
// MiB/s rounded down. It reports no latency; the mean follows from Little's
// law (in flight / throughput), which holds for a closed loop at a fixed depth.
import { CpuMeter, runWithCpu } from './cpu.js';
import { isRandom, isRead, type BenchContext, type Measurement } from './workload.js';

export interface IscsiPerfRun {
  /** iscsi://127.0.0.1:PORT/IQN/LUN */
  readonly url: string;
  /** Transfer size in the LUN's blocks. */
  readonly blocks: number;
  readonly blockBytes: number;
  readonly queueDepth: number;
  readonly seconds: number;
  readonly random: boolean;
  /** A CPU list for taskset(1): iscsi-perf is pinned to these cores. */
  readonly cpus?: string;
}

export interface IscsiPerfResult {
  readonly iops: number;
  readonly mbps: number;
  readonly meanUs: number;
  readonly ios: number;
  readonly seconds: number;
  readonly cpuMs: number | null;
}

/** The last "iops average" figure in iscsi-perf's output, or null. */
export function parseIscsiPerf(output: string): number | null {
  let last: number | null = null;
  for (const m of output.matchAll(/iops average (\d+)/g)) last = Number(m[1]);
  return last;
}

export async function runIscsiPerf(r: IscsiPerfRun): Promise<IscsiPerfResult> {
  // -t takes whole seconds.
  const seconds = Math.max(1, Math.round(r.seconds));
  const args = ['-i', 'iqn.2026-11.io.rblk:bench-initiator', '-m', String(r.queueDepth), '-b', String(r.blocks), '-t', String(seconds)];
  if (r.random) args.push('-r');
  args.push(r.url);
  const [file, argv] = r.cpus !== undefined ? ['taskset', ['-c', r.cpus, 'iscsi-perf', ...args]] : ['iscsi-perf', args];
  const run = await runWithCpu(file, argv, seconds * 1000 + 30_000);
  const iops = parseIscsiPerf(run.stdout);
  if (run.code !== 0 || iops === null) throw new Error(`iscsi-perf exited with ${run.code}: ${(run.stdout + run.stderr).replace(/\r/g, '\n').trim().slice(-400)}`);
  return {
    iops,
    mbps: (iops * r.blocks * r.blockBytes) / 1e6,
    meanUs: iops > 0 ? (r.queueDepth / iops) * 1e6 : NaN,
    ios: Math.round(iops * seconds),
    seconds,
    cpuMs: run.cpuMs,
  };
}

/**
 * Every read workload of the run through iscsi-perf against one iSCSI URL;
 * write workloads are skipped (iscsi-perf only reads). `server` is the
 * target process whose CPU time is sampled.
 */
export async function measureIscsi(
  ctx: BenchContext,
  url: string,
  server: { name: string; pid: number },
): Promise<{ measurements: Measurement[]; skipped: Record<string, string> }> {
  const skipped: Record<string, string> = {};
  const measurements: Measurement[] = [];
  for (const w of ctx.workloads) {
    if (!isRead(w)) {
      skipped[w.id] = 'iscsi-perf only reads';
      continue;
    }
    ctx.progress(`${server.name} (iSCSI): ${w.label}`);
    const meter = new CpuMeter([{ name: server.name, side: 'server', pid: server.pid }]);
    const r = await runIscsiPerf({
      url,
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
      note: "mean latency from Little's law; iscsi-perf reports no percentiles",
    });
  }
  return { measurements, skipped };
}
