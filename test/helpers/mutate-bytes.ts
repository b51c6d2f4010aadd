// The byte-level mutation the protocol fuzz tests share (test/nbd/fuzz.test.ts,
// test/iscsi/fuzz.test.ts): they build well-formed messages of their own
// protocol, then hand them here. The rblk wire's capsule fuzz has its own,
// which also keeps the capsule header consistent (bench/soak/mutate.ts).

/**
 * A copy of `b` with one to three edits: a byte set at random, a value from
 * `extremes` stamped as a big-endian 32-bit word at a random offset (a length,
 * an offset, a tag), or a truncation, which ends the edits. `int(n)` draws an
 * integer in 0..n-1 from the test's seeded generator, so a run replays.
 */
export function mutateBytes(int: (n: number) => number, b: Buffer, extremes: readonly number[]): Buffer {
  const out = Buffer.from(b);
  for (let n = 1 + int(3); n > 0 && out.length > 0; n--) {
    const k = int(10);
    if (k < 5) out[int(out.length)] = int(256);
    else if (k < 8 && out.length >= 4) out.writeUInt32BE(extremes[int(extremes.length)]! >>> 0, int(out.length - 3));
    else return out.subarray(0, int(out.length));
  }
  return out;
}
