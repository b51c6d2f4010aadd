// Progress of a byte transfer (read, write, verify) on stderr: bytes done of
// the total, the rate over the last interval, the elapsed time. Redrawn on a
// timer, so the I/O path only adds to a counter (docs/cli.md "Progress").
import { progressBar, progressInterval, type ProgressBar } from './progress-bar.js';
import { formatBytes, formatRate } from './size.js';

export class TransferProgress {
  readonly #bar: ProgressBar | null;
  readonly #timer: NodeJS.Timeout | null;
  readonly #start = performance.now();
  #total: number | null;
  #phase: string;
  #done = 0;
  #last = { ms: 0, done: 0 };

  /** total: bytes, or null when unknown (stdin). flag: --progress / --no-progress. */
  constructor(flag: boolean | undefined, total: number | null, phase: string) {
    this.#bar = progressBar(flag);
    this.#total = total;
    this.#phase = phase;
    this.#timer = this.#bar === null ? null : setInterval(() => this.draw(), progressInterval());
    // A progress timer alone must not keep the process alive.
    this.#timer?.unref();
  }

  /** Bytes completed since the last call. */
  add(bytes: number): void {
    this.#done += bytes;
  }

  /** Starts another phase (verify: writing, then checking) over a new total. */
  phase(name: string, total: number | null): void {
    this.#phase = name;
    this.#total = total;
    this.#done = 0;
    this.#last = { ms: performance.now() - this.#start, done: 0 };
  }

  get elapsedMs(): number {
    return performance.now() - this.#start;
  }

  private draw(): void {
    if (this.#bar === null) return;
    const ms = performance.now() - this.#start;
    const rate = ((this.#done - this.#last.done) * 1000) / Math.max(ms - this.#last.ms, 1);
    this.#last = { ms, done: this.#done };
    const of = this.#total === null ? '' : ` of ${formatBytes(this.#total)}`;
    const fraction = this.#total === null ? null : this.#total === 0 ? 1 : this.#done / this.#total;
    this.#bar.update(fraction, `${this.#phase} ${formatBytes(this.#done)}${of}  ${formatRate(rate)}  ${(ms / 1000).toFixed(1)} s`);
  }

  /** Erases the bar until the next redraw, so a line written to the same terminal is not drawn over it. */
  clear(): void {
    this.#bar?.clear();
  }

  /** Stops redrawing and erases the bar. */
  stop(): void {
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#bar?.clear();
  }
}
