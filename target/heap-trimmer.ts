// Gives the C heap back after connections end (docs/architecture.md, "Memory").
import { addon } from '../native/binding.js';

/** How long after a connection ends the trim runs, and so at most how often. */
const TRIM_DELAY_MS = 1000;

/**
 * noteRelease() after anything that freed a connection's memory: one trim
 * follows within TRIM_DELAY_MS, however many connections ended meanwhile, so
 * a churn of thousands a second costs one malloc_trim a second.
 */
export class HeapTrimmer {
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly trim: () => boolean = () => addon().trimHeap()) {}

  noteRelease(): void {
    if (this.timer !== null) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.trim();
    }, TRIM_DELAY_MS);
    this.timer.unref();
  }

  close(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }
}
