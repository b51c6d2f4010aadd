// Latency percentiles from an HDR histogram (node:perf_hooks createHistogram,
// 3 significant figures): constant memory however long a bench runs. The
// percentiles are fio's default set (fio(1) --percentile_list) plus p99.99.

import { createHistogram, type RecordableHistogram } from 'node:perf_hooks';

/** Microseconds. */
export interface LatencySummary {
  min: number;
  mean: number;
  /** Standard deviation. */
  stdev: number;
  p1: number;
  p5: number;
  p10: number;
  p50: number;
  p90: number;
  p95: number;
  p99: number;
  p99_9: number;
  p99_99: number;
  max: number;
}

/** The percentiles reported, as [JSON key, percentile]. */
export const PERCENTILES: ReadonlyArray<readonly [keyof LatencySummary, number]> = [
  ['p1', 1],
  ['p5', 5],
  ['p10', 10],
  ['p50', 50],
  ['p90', 90],
  ['p95', 95],
  ['p99', 99],
  ['p99_9', 99.9],
  ['p99_99', 99.99],
];

const round = (ns: number): number => Math.round(ns / 100) / 10;

export class LatencyRecorder {
  readonly #h: RecordableHistogram = createHistogram();

  /** One operation's latency in nanoseconds (at least 1: the histogram's lowest value). */
  record(ns: number): void {
    this.#h.record(Math.max(1, Math.round(ns)));
  }

  get count(): number {
    return this.#h.count;
  }

  summary(): LatencySummary {
    const h = this.#h;
    const empty = h.count === 0;
    const out = { min: 0, mean: 0, stdev: 0, max: 0 } as LatencySummary;
    for (const [key, p] of PERCENTILES) out[key] = empty ? 0 : round(h.percentile(p));
    if (empty) return out;
    out.min = round(h.min);
    out.mean = round(h.mean);
    // A single sample has no spread; the histogram reports NaN for it.
    out.stdev = Number.isFinite(h.stddev) ? round(h.stddev) : 0;
    out.max = round(h.max);
    return out;
  }
}
