// One log line per interval for an event that can repeat thousands of times a
// second (a flood of connections refused at the pre-login limit): the first
// occurrence is logged at once, later ones are counted and reported with the
// next line, so the log neither floods nor hides how many there were.
export class ThrottledLog {
  private last = -Infinity;
  private suppressed = 0;

  constructor(
    private readonly intervalMs: number,
    private readonly write: (message: string) => void,
  ) {}

  /** Logs message, or counts it when a line went out less than intervalMs ago. */
  note(message: string): void {
    const now = performance.now();
    if (now - this.last < this.intervalMs) {
      this.suppressed++;
      return;
    }
    const more = this.suppressed > 0 ? ` (and ${this.suppressed} more since the last report)` : '';
    this.suppressed = 0;
    this.last = now;
    this.write(message + more);
  }
}
