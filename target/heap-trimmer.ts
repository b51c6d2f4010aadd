// Gives the C heap back after connections end, and what V8's heap grew once a burst of them is
// over (docs/architecture.md, "Memory").
import { addon } from '../native/binding.js';
import { collectAll, collectYoung, JS_HEAP_SAMPLE_GAP_MS } from './js-heap.js';

export interface TrimDelays {
  /** How long after a connection ends the trim runs, and so at most how often. */
  trimMs: number;
  /** How long without a connection ending before the burst counts as over. */
  settleMs: number;
  /** However steady the churn, it counts as over this long after its first release. */
  settleMaxMs: number;
  /** Between V8's two collections (js-heap.ts). */
  sampleGapMs: number;
}

const DELAYS: TrimDelays = { trimMs: 1000, settleMs: 5000, settleMaxMs: 60_000, sampleGapMs: JS_HEAP_SAMPLE_GAP_MS };

/**
 * noteRelease() after anything that freed a connection's memory: one trim
 * follows within trimMs, however many connections ended meanwhile, so a churn
 * of thousands a second costs one malloc_trim a second. Once releases stop for
 * settleMs (or settleMaxMs after the first of a steady churn), V8 collects its
 * young generation, and sampleGapMs later its whole heap, which gives back
 * what the burst made it grow (js-heap.ts); a trim follows. A release in
 * between starts over: the burst was not over.
 */
export class HeapTrimmer {
  private timer: NodeJS.Timeout | null = null;
  private settle: NodeJS.Timeout | null = null;
  private shrink: NodeJS.Timeout | null = null;
  /** When the pending settle was first scheduled: releases push it back until settleMaxMs after. */
  private settleSince = 0;
  private readonly delays: TrimDelays;

  constructor(
    private readonly trim: () => boolean = () => addon().trimHeap(),
    private readonly sample: () => boolean = collectYoung,
    private readonly collect: () => boolean = collectAll,
    delays: Partial<TrimDelays> = {},
  ) {
    this.delays = { ...DELAYS, ...delays };
  }

  noteRelease(): void {
    this.scheduleSettle();
    if (this.timer !== null) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.trim();
    }, this.delays.trimMs);
    this.timer.unref();
  }

  private scheduleSettle(): void {
    if (this.shrink !== null) {
      clearTimeout(this.shrink);
      this.shrink = null;
    }
    if (this.settle !== null) {
      if (performance.now() - this.settleSince < this.delays.settleMaxMs) this.settle.refresh();
      return;
    }
    this.settleSince = performance.now();
    this.settle = setTimeout(() => {
      this.settle = null;
      this.sample();
      this.shrink = setTimeout(() => {
        this.shrink = null;
        this.collect();
        this.trim();
      }, this.delays.sampleGapMs);
      this.shrink.unref();
    }, this.delays.settleMs);
    this.settle.unref();
  }

  close(): void {
    for (const t of [this.timer, this.settle, this.shrink]) if (t !== null) clearTimeout(t);
    this.timer = null;
    this.settle = null;
    this.shrink = null;
  }
}
