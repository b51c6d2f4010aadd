// A small seeded generator (xorshift32, Marsaglia 2003): bench offsets and
// verify's block filler must be reproducible from a seed, and fast.

export class Xorshift32 {
  #s: number;

  constructor(seed: number) {
    // Zero is xorshift's fixed point; mix the seed so nearby seeds diverge at once.
    this.#s = (Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b) >>> 0) || 0x6d2b79f5;
  }

  /** The next value in 1..2^32-1. */
  next(): number {
    let x = this.#s;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.#s = x >>> 0;
    return this.#s;
  }

  /** An integer in 0..n-1 (n up to 2^53: two draws when n exceeds 2^32). */
  below(n: number): number {
    if (n <= 0x1_0000_0000) return Math.floor((this.next() / 0x1_0000_0000) * n);
    const r = this.next() * 0x20_0000 + (this.next() >>> 11);
    return Math.floor((r / 2 ** 53) * n);
  }
}
