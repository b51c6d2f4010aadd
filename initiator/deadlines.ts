// Command timeouts of one connection as one timer (docs/initiator.md
// "Timeouts"): every command gets the same timeout, so deadlines come due in
// the order commands were sent, and a Map (which iterates in insertion order)
// is a queue that also deletes in O(1). One timer is armed for the oldest
// entry; when it fires, what is due is handed out and the timer re-armed for
// the next. No timer is left once nothing is outstanding, so an idle process
// can exit.

export class Deadlines<K> {
  private readonly due = new Map<K, number>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly ms: number,
    private readonly expired: (key: K) => void,
  ) {}

  /** Starts the clock for key (no-op when timeouts are off). */
  add(key: K): void {
    if (this.ms <= 0) return;
    this.due.set(key, performance.now() + this.ms);
    if (this.timer === null) this.arm(this.ms);
  }

  /** The command ended: it no longer times out. */
  delete(key: K): void {
    if (!this.due.delete(key) || this.due.size > 0 || this.timer === null) return;
    clearTimeout(this.timer);
    this.timer = null;
  }

  /** Forgets everything (the connection is gone; its commands end another way). */
  clear(): void {
    this.due.clear();
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  private arm(ms: number): void {
    this.timer = setTimeout(() => this.sweep(), Math.max(1, ms));
  }

  private sweep(): void {
    this.timer = null;
    const now = performance.now();
    for (const [key, at] of this.due) {
      if (at > now) {
        // expired() may have sent something, which armed the timer already.
        if (this.timer === null) this.arm(at - now);
        return;
      }
      this.due.delete(key);
      this.expired(key);
    }
  }
}
