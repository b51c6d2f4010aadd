// Exclusive locks on byte ranges, granted in arrival order among overlapping
// requests. A read-modify-write of a partial block must not interleave with
// another write to that block, or one of the two updates is lost.

interface Waiter {
  start: number;
  end: number;
  grant: () => void;
}

function overlaps(a: { start: number; end: number }, b: { start: number; end: number }): boolean {
  return a.start < b.end && b.start < a.end;
}

export class RangeLock {
  private readonly held: Array<{ start: number; end: number }> = [];
  private readonly waiting: Waiter[] = [];

  /** Resolves once [start, end) is free; call the returned function to release it. */
  acquire(start: number, end: number): Promise<() => void> {
    return new Promise((resolve) => {
      const w: Waiter = { start, end, grant: () => resolve(this.holder(w)) };
      this.waiting.push(w);
      this.grantReady();
    });
  }

  /** Ranges held now (for tests and diagnostics). */
  get heldCount(): number {
    return this.held.length;
  }

  private holder(range: { start: number; end: number }): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.held.splice(this.held.indexOf(range), 1);
      this.grantReady();
    };
  }

  // A waiter goes ahead when it overlaps nothing held and no earlier waiter:
  // later requests never overtake an earlier overlapping one.
  private grantReady(): void {
    for (let i = 0; i < this.waiting.length; i++) {
      const w = this.waiting[i];
      if (this.held.some((h) => overlaps(h, w))) continue;
      if (this.waiting.slice(0, i).some((e) => overlaps(e, w))) continue;
      this.waiting.splice(i, 1);
      i--;
      this.held.push(w);
      w.grant();
    }
  }
}
