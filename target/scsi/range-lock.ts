// A per-LU lock over block ranges, so that COMPARE AND WRITE runs as one
// uninterrupted read-compare-write (SBC-4 5.3) against every other command
// on the same blocks, from any session. Ordinary reads and writes take the
// range shared and never wait for each other; COMPARE AND WRITE, ORWRITE,
// WRITE ATOMIC and EXTENDED COPY's destination take it exclusive. Commands
// take it through hold() (or holding()), which releases it however they end. Waiters are served in arrival order, so a waiting exclusive
// holder is not starved by a stream of shared ones.

export type Release = () => void;

/**
 * Runs fn once `lock` is granted and releases it when fn settles, whether it
 * resolves or throws: every command that takes the lock holds it this way,
 * so none can leave a range locked.
 */
export async function holding<T>(lock: Promise<Release>, fn: () => Promise<T>): Promise<T> {
  const release = await lock;
  try {
    return await fn();
  } finally {
    release();
  }
}

interface Entry {
  readonly start: number;
  readonly end: number;
  readonly exclusive: boolean;
  grant?: () => void;
}

function conflict(a: Entry, b: Entry): boolean {
  return (a.exclusive || b.exclusive) && a.start < b.end && b.start < a.end;
}

export class RangeLock {
  readonly #active = new Set<Entry>();
  #waiting: Entry[] = [];
  /** Exclusive entries active or waiting: zero makes shared acquisition a plain insert. */
  #exclusive = 0;

  /** Locks blocks [start, end). */
  acquire(start: number, end: number, exclusive: boolean): Promise<Release> {
    const e: Entry = { start, end, exclusive };
    if (exclusive) this.#exclusive++;
    const release = this.#releaser(e);
    if ((!exclusive && this.#exclusive === 0) || this.#grantable(e, this.#waiting.length)) {
      this.#active.add(e);
      return Promise.resolve(release);
    }
    return new Promise((resolve) => {
      e.grant = () => resolve(release);
      this.#waiting.push(e);
    });
  }

  /** Runs fn holding blocks [start, end), and releases them when it settles (holding). */
  hold<T>(start: number, end: number, exclusive: boolean, fn: () => Promise<T>): Promise<T> {
    return holding(this.acquire(start, end, exclusive), fn);
  }

  get activeCount(): number {
    return this.#active.size;
  }

  get waitingCount(): number {
    return this.#waiting.length;
  }

  #grantable(e: Entry, waitingAhead: number): boolean {
    for (const a of this.#active) if (conflict(a, e)) return false;
    for (let i = 0; i < waitingAhead; i++) if (conflict(this.#waiting[i], e)) return false;
    return true;
  }

  #releaser(e: Entry): Release {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#active.delete(e);
      if (e.exclusive) this.#exclusive--;
      this.#pump();
    };
  }

  #pump(): void {
    const still: Entry[] = [];
    for (const w of this.#waiting) {
      let ok = true;
      for (const a of this.#active) if (conflict(a, w)) ok = false;
      for (const s of still) if (conflict(s, w)) ok = false;
      if (ok) {
        this.#active.add(w);
        w.grant?.();
      } else {
        still.push(w);
      }
    }
    this.#waiting = still;
  }
}
