// Unit attention conditions, one queue per I_T nexus per logical unit
// (SAM-5 5.14, SPC-5 5.14). A nexus the LU has not seen yet starts with
// POWER ON, RESET (29/00), so every new login sees it on its first command.
import { POWER_ON_RESET, type SenseCode } from '../../protocol/scsi/sense-codes.js';

/** Enough for every distinct condition rblk raises; older ones drop first. */
const MAX_PENDING = 8;

export class UnitAttentions {
  readonly #queues = new Map<string, SenseCode[]>();
  /** Called after any change to any queue (the LU's fast-path gate re-decides). */
  onChange: (() => void) | null = null;

  /** Makes sure the nexus is known; a first contact queues 29/00. */
  touch(key: string): void {
    if (!this.#queues.has(key)) {
      this.#queues.set(key, [POWER_ON_RESET]);
      this.onChange?.();
    }
  }

  /** A login or reset: 29/00 replaces whatever was pending (SAM-5 5.14). */
  reset(key: string): void {
    this.#queues.set(key, [POWER_ON_RESET]);
    this.onChange?.();
  }

  forget(key: string): void {
    this.#queues.delete(key);
    this.onChange?.();
  }

  establish(key: string, code: SenseCode): void {
    if (code === POWER_ON_RESET) {
      this.reset(key);
      return;
    }
    const q = this.#queues.get(key);
    // An unseen nexus will get 29/00 first, which subsumes this condition.
    if (q === undefined || q.includes(code) || q.includes(POWER_ON_RESET)) return;
    q.push(code);
    if (q.length > MAX_PENDING) q.shift();
    this.onChange?.();
  }

  /** Raises a condition for every known nexus, except perhaps the one that caused it. */
  establishAll(code: SenseCode, exceptKey?: string): void {
    for (const key of this.#queues.keys()) {
      if (key !== exceptKey) this.establish(key, code);
    }
  }

  /** Takes the oldest pending condition (the command that reports it consumes it). */
  take(key: string): SenseCode | undefined {
    this.touch(key);
    const code = this.#queues.get(key)?.shift();
    if (code !== undefined) this.onChange?.();
    return code;
  }

  pending(key: string): readonly SenseCode[] {
    return this.#queues.get(key) ?? [POWER_ON_RESET];
  }

  get nexusKeys(): IterableIterator<string> {
    return this.#queues.keys();
  }
}
