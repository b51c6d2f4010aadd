// Latency percentiles from an HDR histogram (node:perf_hooks createHistogram,
// 3 significant figures): constant memory however long a bench runs.
import { createHistogram, type RecordableHistogram } from 'node:perf_hooks';

/** Microseconds. */
export interface LatencySummary {
  min: number;
  mean: number;
  p50: number;
  p99: number;
  p99_9: number;
  max: number;
}

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
    if (h.count === 0) return { min: 0, mean: 0, p50: 0, p99: 0, p99_9: 0, max: 0 };
    return { min: round(h.min), mean: round(h.mean), p50: round(h.percentile(50)), p99: round(h.percentile(99)), p99_9: round(h.percentile(99.9)), max: round(h.max) };
  }
}
