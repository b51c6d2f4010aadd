// The transport ceiling in C (bench/ceiling/rma-ceiling): the same one-sided
// RMA as the JavaScript ceiling (bench/peers/transport-ceiling.ts), through
// libfabric directly, with no Node, addon or JavaScript on either side, so
// the report's "÷ transport ceiling" says how far rblk is from the transport
// rather than from our own RMA loop (issue 10, item 7). As there, the loop
// plays the target: a block read is an RMA write into the peer, a block
// write an RMA read from it. The program forks its own passive peer and
// counts both sides' CPU over the timed window itself (getrusage).
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { root } from './children.js';
import { isRandom, isRead, type BenchContext, type Measurement, type SystemInfo, type SystemResult } from './workload.js';

export const RMA_CEILING_BINARY = join(root, 'build', 'ceiling', 'rma-ceiling');

/** The peer's region, as the JavaScript ceiling's transport peer exposes. */
const SPAN = 64 << 20;

export interface SideCpu {
  readonly userUs: number;
  readonly sysUs: number;
  readonly switches: number;
  readonly userUsPerOp: number;
  readonly sysUsPerOp: number;
}

/** The program's one JSON line (bench/ceiling/rma-ceiling.c, print_result). */
export interface RmaCeilingResult {
  readonly provider: string;
  readonly op: 'read' | 'write';
  readonly size: number;
  readonly qd: number;
  readonly pattern: 'rand' | 'seq';
  readonly span: number;
  readonly waits: 'fd' | 'busy-poll';
  /** "delivery" for writes with --delivery-complete; the bench keeps the default, as the JS ceiling does. */
  readonly completion: 'default' | 'delivery';
  readonly mrMode: readonly string[];
  readonly seconds: number;
  readonly ops: number;
  readonly opsPerSec: number;
  readonly mbps: number;
  readonly latencyUs: { readonly p50: number; readonly p90: number; readonly p99: number; readonly mean: number; readonly max: number };
  /** The side posting the RMAs (the target's role). */
  readonly active: SideCpu;
  /** The side exposing the region (the initiator's role). */
  readonly passive: SideCpu;
  readonly verified?: { readonly blocks: number; readonly bytes: number };
}

export interface RmaCeilingRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the program with the given flags; never rejects on a non-zero exit (the caller reads `code`). */
export function runRmaCeiling(args: readonly string[], timeoutMs: number): Promise<RmaCeilingRun> {
  return new Promise((resolve, reject) => {
    execFile(RMA_CEILING_BINARY, args, { timeout: timeoutMs, killSignal: 'SIGKILL' }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number' && !err.killed) return reject(err);
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr });
    });
  });
}

export function parseRmaCeiling(stdout: string): RmaCeilingResult {
  const line = stdout.trim().split('\n').pop() ?? '';
  return JSON.parse(line) as RmaCeilingResult;
}

export function cCeilingSystem(provider: string): SystemInfo {
  return { id: `ceiling-c-${provider}`, label: `transport ceiling (C RMA loop), ${provider} (RMA, no storage)`, kind: 'transport-ceiling', driver: 'bench/ceiling/rma-ceiling (libfabric, no JS)' };
}

export async function runCCeiling(ctx: BenchContext, provider: string): Promise<SystemResult> {
  const system = cCeilingSystem(provider);
  if (!existsSync(RMA_CEILING_BINARY)) return { system, measurements: [], unavailable: `${RMA_CEILING_BINARY} is missing (run scripts/setup.sh)` };
  const measurements: Measurement[] = [];
  for (const w of ctx.workloads) {
    ctx.progress(`C ceiling ${provider}: ${w.label}`);
    const op = isRead(w) ? 'write' : 'read';
    const args = ['--provider', provider, '--op', op, '--size', String(w.blockSize), '--qd', String(w.queueDepth), '--seconds', String(ctx.seconds), '--span', String(SPAN), '--pattern', isRandom(w) ? 'rand' : 'seq'];
    const run = await runRmaCeiling(args, ctx.seconds * 1000 + 60_000);
    if (run.code !== 0) return { system, measurements, unavailable: `rma-ceiling ${args.join(' ')} exited with ${run.code}: ${run.stderr.trim().slice(-400)}` };
    const r = parseRmaCeiling(run.stdout);
    measurements.push({
      workload: w.id,
      iops: r.opsPerSec,
      mbps: r.mbps,
      p50us: r.latencyUs.p50,
      p99us: r.latencyUs.p99,
      meanUs: r.latencyUs.mean,
      ios: r.ops,
      seconds: r.seconds,
      // Sides as in the JavaScript ceiling's row: the loop plays the target (server), the peer the initiator.
      cpu: [
        { process: 'rma-ceiling (RMA loop)', side: 'server', cpuMs: (r.active.userUs + r.active.sysUs) / 1000, switches: r.active.switches },
        { process: 'rma-ceiling (passive peer)', side: 'client', cpuMs: (r.passive.userUs + r.passive.sysUs) / 1000, switches: r.passive.switches },
      ],
      note: `RMA ${op} of ${w.blockSize >> 10} KiB; user/sys µs per op: loop ${r.active.userUsPerOp.toFixed(1)}/${r.active.sysUsPerOp.toFixed(1)}, peer ${r.passive.userUsPerOp.toFixed(1)}/${r.passive.sysUsPerOp.toFixed(1)}`,
    });
  }
  return { system, measurements };
}
