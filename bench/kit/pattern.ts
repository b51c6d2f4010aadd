/**
 * Test data, the one way tests and benchmarks make it (docs/architecture.md, "The test
 * kit"): deterministic from a seed, different for every seed, and never a zero byte, so a
 * lost, misplaced or zero-filled byte shows in a compare.
 */

/** `length` bytes of a xorshift32 stream seeded from `seed` (any integer). */
export function pattern(length: number, seed: number): Buffer {
  const b = Buffer.allocUnsafe(length);
  let x = Math.imul(seed | 0, 0x9e3779b1) ^ Math.floor(seed / 2 ** 32);
  x = x >>> 0 || 1;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    b[i] = (x & 0xff) | 1;
  }
  return b;
}
