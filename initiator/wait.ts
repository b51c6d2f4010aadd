// Small timing helpers for recovery: a cancellable sleep, a promise raced
// against a deadline, and "after the current turn" (so every response capsule
// already delivered has been handled).

/** A sleep that close() can cut short. */
export class Sleep {
  private timer: NodeJS.Timeout | null = null;
  private wake: (() => void) | null = null;

  /** Resolves after ms; keepAlive false lets the process exit meanwhile. */
  for(ms: number, keepAlive = true): Promise<void> {
    this.cancel();
    return new Promise<void>((resolve) => {
      this.wake = resolve;
      this.timer = setTimeout(() => this.cancel(), ms);
      if (!keepAlive) this.timer.unref();
    });
  }

  /** Ends the current sleep now (it resolves). */
  cancel(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const w = this.wake;
    this.wake = null;
    w?.();
  }
}

/** The promise's value, or `fallback` when it has not settled within ms. */
export function within<T, F>(p: Promise<T>, ms: number, fallback: F): Promise<T | F> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<F>((resolve) => (timer = setTimeout(() => resolve(fallback), ms)));
  return Promise.race([p, deadline]).finally(() => clearTimeout(timer));
}

/** Resolves after the I/O callbacks and microtasks already queued have run. */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
