// The capsule fuzzer's generators, shared by the decoder fuzz test
// (test/protocol/fuzz.test.ts) and the native fast-path decoder's
// (test/native/fast-decode.test.ts): seeded, so every run sees the same inputs.
import { Opcode } from '../../protocol/wire/index.js';

const INTERESTING_U32 = [0, 1, 2, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff];
const OPCODES = Object.values(Opcode);

/** mulberry32: small, fast and the same on every run. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

export function mutate(rand: () => number, source: Buffer): Buffer {
  let buf = Buffer.from(source);
  const int = (n: number): number => Math.floor(rand() * n);
  const edits = 1 + int(4);
  for (let e = 0; e < edits; e++) {
    const at = buf.length > 0 ? int(buf.length) : 0;
    switch (int(7)) {
      case 0:
        if (buf.length > 0) buf[at] ^= 1 << int(8);
        break;
      case 1:
        if (buf.length > 0) buf[at] = [0, 1, 0x7f, 0x80, 0xff][int(5)];
        break;
      case 2:
        if (buf.length >= 4) buf.writeUInt32BE(INTERESTING_U32[int(INTERESTING_U32.length)], int(buf.length - 3));
        break;
      case 3:
        buf = buf.subarray(0, int(buf.length + 1));
        break;
      case 4:
        buf = Buffer.concat([buf, Buffer.from(Array.from({ length: 1 + int(40) }, () => int(256)))]);
        break;
      case 5:
        if (buf.length > 0) buf[at] = int(256);
        break;
      case 6:
        // Descriptor counts and name lengths sit in single bytes; aim at them often.
        if (buf.length > 31) buf[[27, 30, 31][int(3)]] = int(256);
        break;
    }
  }
  // Most of the time keep the header self-consistent so that the body checks get exercised.
  if (rand() < 0.7 && buf.length >= 8) buf.writeUInt32BE(buf.length, 4);
  if (rand() < 0.8 && buf.length >= 2) buf[1] = 1;
  return Buffer.from(buf);
}

export function randomCapsule(rand: () => number): Buffer {
  const int = (n: number): number => Math.floor(rand() * n);
  const buf = Buffer.from(Array.from({ length: int(160) }, () => (rand() < 0.5 ? 0 : int(256))));
  if (buf.length >= 16) {
    if (rand() < 0.9) buf[0] = OPCODES[int(OPCODES.length)];
    if (rand() < 0.9) buf[1] = 1;
    if (rand() < 0.8) buf.writeUInt16BE(0, 2);
    if (rand() < 0.8) buf.writeUInt32BE(buf.length, 4);
  }
  return buf;
}

