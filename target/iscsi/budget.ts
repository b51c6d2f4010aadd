// The bytes of data buffers one iSCSI connection may hold at once
// (limits.connection_memory, at least max_io): a take waits its turn, in
// order, until the bytes are there; it never fails (the data pool's rule,
// docs/architecture.md "Memory").
export class Budget {
  private used = 0;
  private readonly waiters: { n: number; go: () => void }[] = [];
  constructor(private readonly limit: number) {}
  async take(n: number): Promise<void> {
    if (this.waiters.length === 0 && this.used + n <= this.limit) {
      this.used += n;
      return;
    }
    await new Promise<void>((go) => this.waiters.push({ n, go }));
  }
  give(n: number): void {
    this.used -= n;
    while (this.waiters.length > 0 && (this.used + this.waiters[0].n <= this.limit || this.used === 0)) {
      const w = this.waiters.shift()!;
      this.used += w.n;
      w.go();
    }
  }
}
