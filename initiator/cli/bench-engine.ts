// The load generator behind `rblk bench`: queueDepth workers, each with its
// own buffer, keep that many operations in flight (a closed loop, as fio's
// iodepth), until the runtime or the byte budget is used up.
import { LatencyRecorder, type LatencySummary } from './latency.js';
import { Xorshift32 } from './prng.js';
import type { ByteRange } from './byte-range.js';

export type BenchPattern = 'rand' | 'seq';
export type BenchMode = 'read' | 'write' | 'mixed';

export interface BenchPlan {
  pattern: BenchPattern;
  rw: BenchMode;
  /** Percentage of reads in mixed mode. */
  readPercent: number;
  /** Bytes per operation: whole blocks. */
  blockSize: number;
  queueDepth: number;
  /** Where the operations land; a multiple of blockSize long. */
  range: ByteRange;
  /** Stop issuing after this long, or after totalBytes (whichever is given; runtime wins when both are). */
  runtimeMs: number | null;
  totalBytes: number | null;
  seed: number;
}

/** What the bench runs against: a Volume, or anything shaped like one. */
export interface BenchTarget {
  read(offset: number, into: Buffer): Promise<unknown>;
  write(offset: number, data: Buffer): Promise<void>;
}

export interface BenchProgress {
  elapsedMs: number;
  ops: number;
  bytes: number;
  /** 0..1 of the runtime or the byte budget. */
  fraction: number;
}

export interface OpStats {
  ops: number;
  bytes: number;
  iops: number;
  /** Bytes per second. */
  bandwidth: number;
  latencyUs: LatencySummary;
}

export interface BenchResult extends OpStats {
  elapsedMs: number;
  /** Only when the plan issues reads (rw read or mixed). */
  read?: OpStats;
  /** Only when the plan issues writes (rw write or mixed). */
  write?: OpStats;
  /** Stopped early by the caller's signal. */
  interrupted: boolean;
}

class Counter {
  ops = 0;
  bytes = 0;
  readonly latency = new LatencyRecorder();

  stats(elapsedMs: number): OpStats {
    const s = elapsedMs / 1000;
    return { ops: this.ops, bytes: this.bytes, iops: s > 0 ? this.ops / s : 0, bandwidth: s > 0 ? this.bytes / s : 0, latencyUs: this.latency.summary() };
  }
}

/**
 * Runs the plan with one buffer per worker (buffers.length is the queue
 * depth). Rejects with the first I/O error, after the operations in flight
 * have ended.
 */
export async function runBench(
  target: BenchTarget,
  plan: BenchPlan,
  buffers: readonly Buffer[],
  opts: { onProgress?: (p: BenchProgress) => void; progressMs?: number; signal?: AbortSignal } = {},
): Promise<BenchResult> {
  const bs = plan.blockSize;
  const slots = Math.floor(plan.range.length / bs);
  if (slots < 1) throw new RangeError(`the bench range (${plan.range.length} bytes) holds no ${bs}-byte operation`);
  const rng = new Xorshift32(plan.seed);
  const all = new Counter();
  const reads = new Counter();
  const writes = new Counter();
  let cursor = 0;
  let issuedBytes = 0;
  let failure: unknown = null;
  const start = performance.now();
  const elapsed = (): number => performance.now() - start;
  const finished = (): boolean =>
    failure !== null ||
    opts.signal?.aborted === true ||
    (plan.runtimeMs !== null ? elapsed() >= plan.runtimeMs : issuedBytes >= (plan.totalBytes ?? 0));

  const nextOffset = (): number => {
    if (plan.pattern === 'rand') return plan.range.offset + rng.below(slots) * bs;
    const at = plan.range.offset + cursor * bs;
    cursor = (cursor + 1) % slots;
    return at;
  };
  const isRead = (): boolean => (plan.rw === 'read' ? true : plan.rw === 'write' ? false : rng.below(100) < plan.readPercent);

  const worker = async (buf: Buffer): Promise<void> => {
    while (!finished()) {
      const offset = nextOffset();
      const read = isRead();
      issuedBytes += bs;
      const t0 = process.hrtime.bigint();
      try {
        if (read) await target.read(offset, buf);
        else await target.write(offset, buf);
      } catch (e) {
        failure ??= e;
        return;
      }
      const ns = Number(process.hrtime.bigint() - t0);
      for (const c of [all, read ? reads : writes]) {
        c.ops++;
        c.bytes += bs;
        c.latency.record(ns);
      }
    }
  };

  const timer =
    opts.onProgress === undefined
      ? null
      : setInterval(() => {
          const ms = elapsed();
          const fraction = plan.runtimeMs !== null ? ms / plan.runtimeMs : issuedBytes / (plan.totalBytes ?? 1);
          opts.onProgress?.({ elapsedMs: ms, ops: all.ops, bytes: all.bytes, fraction: Math.min(1, fraction) });
        }, opts.progressMs ?? 250);
  try {
    await Promise.all(buffers.map((b) => worker(b)));
  } finally {
    if (timer !== null) clearInterval(timer);
  }
  if (failure !== null) throw failure;
  const ms = elapsed();
  return {
    ...all.stats(ms),
    elapsedMs: ms,
    ...(plan.rw !== 'write' ? { read: reads.stats(ms) } : {}),
    ...(plan.rw !== 'read' ? { write: writes.stats(ms) } : {}),
    interrupted: opts.signal?.aborted === true,
  };
}
