// A per-LU lock over block ranges, so that COMPARE AND WRITE runs as one
// uninterrupted read-compare-write (SBC-4 5.3) against every other command
// on the same blocks, from any session. Ordinary reads and writes take the
// range shared and never wait for each other; COMPARE AND WRITE, ORWRITE,
// WRITE ATOMIC and EXTENDED COPY's destination take it exclusive. Commands
// take it through hold() (or holding()), which releases it however they end. Waiters are served in arrival order, so a waiting exclusive
// holder is not starved by a stream of shared ones.
//
// The lock also fences a lost connection's I/O (docs/target.md "A lost
// connection's commands"). Each command takes its range as its I_T nexus (the
// owner). When the connection goes, fence(owner) turns every range the owner
// holds into an exclusive one: a command still inside the backend there (a
// stalled device, a cluster that does not answer) then keeps every later
// command on those blocks, from any connection, waiting until it has
// finished, so the copy an initiator reissues elsewhere, and whatever it
// writes after that, cannot land before the first copy does. A range the owner
// is still waiting for is granted as usual and then refused (CommandAborted):
// nothing of a lost connection starts on the backend once it is fenced.

export type Release = () => void;

/** What acquire() rejects with for an owner fenced before its range was granted: the command answers TASK ABORTED. */
export class CommandAborted extends Error {
  constructor() {
    super('the connection was lost before the command reached the backend');
  }
}

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
  /** Not readonly: fence() makes a lost owner's shared ranges exclusive. */
  exclusive: boolean;
  readonly owner: object | undefined;
  grant?: () => void;
  refuse?: () => void;
}

function conflict(a: Entry, b: Entry): boolean {
  return (a.exclusive || b.exclusive) && a.start < b.end && b.start < a.end;
}

export class RangeLock {
  readonly #active = new Set<Entry>();
  #waiting: Entry[] = [];
  /** Exclusive entries active or waiting: zero makes shared acquisition a plain insert. */
  #exclusive = 0;

  /** Owners whose connection is gone (fence()). Weak: a nexus object lives as long as its connection's commands. */
  readonly #fenced = new WeakSet<object>();

  /**
   * Locks blocks [start, end) for `owner` (the command's I_T nexus), or
   * rejects with CommandAborted once that owner is fenced.
   */
  acquire(owner: object | undefined, start: number, end: number, exclusive: boolean): Promise<Release> {
    if (owner !== undefined && this.#fenced.has(owner)) return Promise.reject(new CommandAborted());
    const e: Entry = { start, end, exclusive, owner };
    if (exclusive) this.#exclusive++;
    const release = this.#releaser(e);
    if ((!exclusive && this.#exclusive === 0) || this.#grantable(e, this.#waiting.length)) {
      this.#active.add(e);
      return Promise.resolve(release);
    }
    return new Promise((resolve, reject) => {
      e.grant = () => resolve(release);
      e.refuse = () => reject(new CommandAborted());
      this.#waiting.push(e);
    });
  }

  /** Runs fn holding blocks [start, end) for owner, and releases them when it settles (holding). */
  hold<T>(owner: object | undefined, start: number, end: number, exclusive: boolean, fn: () => Promise<T>): Promise<T> {
    return holding(this.acquire(owner, start, end, exclusive), fn);
  }

  /**
   * The owner's connection is gone: from now on its ranges still held are
   * exclusive until released, and it is granted nothing more. Returns how
   * many held ranges were fenced.
   */
  fence(owner: object): number {
    if (this.#fenced.has(owner)) return 0;
    this.#fenced.add(owner);
    let n = 0;
    for (const e of this.#active) {
      if (e.owner !== owner) continue;
      n++;
      if (!e.exclusive) {
        e.exclusive = true;
        this.#exclusive++;
      }
    }
    // Its waiting ranges leave the queue refused (#pump), which may let others go.
    this.#pump();
    return n;
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
      if (w.owner !== undefined && this.#fenced.has(w.owner)) {
        if (w.exclusive) this.#exclusive--;
        w.refuse?.();
        continue;
      }
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
