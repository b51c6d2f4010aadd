// The in-process load generator, fio's closed loop in miniature: queueDepth
// workers, each with its own buffer (slot), keep one I/O in flight each for
// the duration. Random offsets are block-aligned and uniform over the span;
// sequential ones come from one shared cursor, as fio's single sequential
// stream with several I/Os in flight. Latency is timed around the whole call.
import { createHistogram } from 'node:perf_hooks';
import { isRandom, type Workload } from './workload.js';

/** One I/O: `slot` names the worker (and its buffer), `offset` the byte offset. */
export type IoFn = (slot: number, offset: number) => Promise<void>;

export interface LoopResult {
  readonly iops: number;
  readonly mbps: number;
  readonly p50us: number;
  readonly p99us: number;
  readonly meanUs: number;
  readonly ios: number;
  readonly seconds: number;
}

export async function runLoop(w: Workload, span: number, seconds: number, io: IoFn): Promise<LoopResult> {
  const blocks = Math.floor(span / w.blockSize);
  if (blocks < 1) throw new RangeError(`a span of ${span} bytes holds no ${w.blockSize}-byte block`);
  const h = createHistogram();
  let cursor = 0;
  let done = 0;
  let stop = false;
  const nextOffset = (): number => {
    if (isRandom(w)) return Math.floor(Math.random() * blocks) * w.blockSize;
    const at = cursor;
    cursor = (cursor + 1) % blocks;
    return at * w.blockSize;
  };
  const timer = setTimeout(() => (stop = true), seconds * 1000);
  const t0 = process.hrtime.bigint();
  const end = t0 + BigInt(Math.round(seconds * 1e9));
  const worker = async (slot: number): Promise<void> => {
    while (!stop) {
      const s = process.hrtime.bigint();
      await io(slot, nextOffset());
      const now = process.hrtime.bigint();
      h.record(Number(now - s) || 1);
      done++;
      // The timer alone is not enough: completions that keep arriving within one
      // poll callback can hold the loop away from its timer phase for seconds.
      if (now >= end) stop = true;
    }
  };
  try {
    await Promise.all(Array.from({ length: w.queueDepth }, (_, i) => worker(i)));
  } finally {
    clearTimeout(timer);
    stop = true;
  }
  const total = Number(process.hrtime.bigint() - t0) / 1e9;
  return {
    iops: done / total,
    mbps: (done * w.blockSize) / total / 1e6,
    p50us: h.percentile(50) / 1000,
    p99us: h.percentile(99) / 1000,
    meanUs: h.mean / 1000,
    ios: done,
    seconds: total,
  };
}
