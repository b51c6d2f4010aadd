// iscsi-perf (libiscsi-bin) as the load generator for tgt. It only reads
// (READ(16)), keeps -m commands in flight, and prints one progress line per
// second separated by '\r', ending in "iops average N (M MB/s)" where M is
// MiB/s rounded down. It reports no latency; the mean follows from Little's
// law (in flight / throughput), which holds for a closed loop at a fixed depth.
import { runWithCpu } from './cpu.js';

export interface IscsiPerfRun {
  /** iscsi://127.0.0.1:PORT/IQN/LUN */
  readonly url: string;
  /** Transfer size in the LUN's blocks. */
  readonly blocks: number;
  readonly blockBytes: number;
  readonly queueDepth: number;
  readonly seconds: number;
  readonly random: boolean;
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
  const run = await runWithCpu('iscsi-perf', args, seconds * 1000 + 30_000);
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
