// A one-line progress bar on stderr: redrawn in place with \r on a terminal;
// elsewhere (asked for with --progress into a log or a pipe) one plain line
// per update, so the file does not collect \r frames (docs/cli.md "Progress").

export class ProgressBar {
  readonly #out: NodeJS.WritableStream;
  readonly #width: number;
  readonly #redraw: boolean;
  #shown = 0;

  constructor(out: NodeJS.WritableStream, width = 30, redraw = true) {
    this.#out = out;
    this.#width = width;
    this.#redraw = redraw;
  }

  /** Redraws the bar at fraction (0..1; null when the total is not known) with a label after it. */
  update(fraction: number | null, label: string): void {
    const f = fraction === null ? 0 : Math.max(0, Math.min(1, fraction));
    const pct = fraction === null ? '   ?' : `${String(Math.floor(f * 100)).padStart(3)}%`;
    if (!this.#redraw) {
      this.#out.write(`${pct}  ${label}\n`);
      return;
    }
    const filled = Math.round(f * this.#width);
    const line = `[${'#'.repeat(filled)}${'-'.repeat(this.#width - filled)}] ${pct}  ${label}`;
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

/**
 * The bar a command shows: with --progress, or by default when stderr is a
 * terminal; null with --no-progress or when stderr is not a terminal.
 */
export function progressBar(flag: boolean | undefined): ProgressBar | null {
  const tty = process.stderr.isTTY === true;
  return (flag ?? tty) ? new ProgressBar(process.stderr, 30, tty) : null;
}

/** How often a command redraws its progress: often on a terminal, once a second into a file. */
export function progressInterval(): number {
  return process.stderr.isTTY === true ? 250 : 1000;
}
