// Tracks in-flight I/O so close() never closes a descriptor under a pending
// syscall: the addon's fallocate/lseek/ioctl jobs use raw fd numbers, and a
// number closed and reused mid-call would hit some other file.
import { backendError } from './backend-error.js';

export class IoGate {
  #closed = false;
  #inflight = 0;
  #drained: (() => void) | null = null;

  constructor(private readonly what: string) {}

  get closed(): boolean {
    return this.#closed;
  }

  /** Runs one operation, or fails with EBADF once close() has begun. */
  async run<T>(op: () => Promise<T>): Promise<T> {
    if (this.#closed) throw backendError('EBADF', `${this.what} is closed`);
    this.#inflight++;
    try {
      return await op();
    } finally {
      this.#inflight--;
      if (this.#inflight === 0 && this.#drained !== null) this.#drained();
    }
  }

  /** Refuses new operations and waits for running ones; false if already closed. */
  async close(): Promise<boolean> {
    if (this.#closed) return false;
    this.#closed = true;
    if (this.#inflight > 0) await new Promise<void>((resolve) => (this.#drained = resolve));
    return true;
  }
}
