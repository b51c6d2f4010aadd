// A one-line progress bar redrawn in place with \r: for a terminal only
// (a log file or a pipe would collect every frame).

export class ProgressBar {
  readonly #out: NodeJS.WritableStream;
  readonly #width: number;
  #shown = 0;

  constructor(out: NodeJS.WritableStream, width = 30) {
    this.#out = out;
    this.#width = width;
  }

  /** Redraws the bar at fraction (0..1) with a label after it. */
  update(fraction: number, label: string): void {
    const f = Math.max(0, Math.min(1, fraction));
    const filled = Math.round(f * this.#width);
    const line = `[${'#'.repeat(filled)}${'-'.repeat(this.#width - filled)}] ${String(Math.floor(f * 100)).padStart(3)}%  ${label}`;
    this.#out.write(`\r${line.padEnd(this.#shown)}`);
    this.#shown = line.length;
  }

  /** Erases the bar, leaving the cursor at the start of the empty line. */
  clear(): void {
    if (this.#shown === 0) return;
    this.#out.write(`\r${' '.repeat(this.#shown)}\r`);
    this.#shown = 0;
  }
}
