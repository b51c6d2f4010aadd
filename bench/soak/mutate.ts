// Seeded capsule mutation, the same recipe as the decoder fuzzing of test/protocol/fuzz.test.ts
// (bit flips, boundary bytes and words, truncation, extension, the single-byte count fields),
// here aimed at a live target rather than at the decoders.
import { Opcode } from '../../protocol/wire/index.js';

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

const INTERESTING_U32 = [0, 1, 2, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff];
const OPCODES = Object.values(Opcode);

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
        if (buf.length > 31) buf[[27, 30, 31][int(3)]] = int(256);
        break;
    }
  }
  // Mostly keep the header self-consistent so that the body checks are reached.
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

/** A 16-byte CDB: usually a real opcode with random fields, sometimes pure noise. */
export function randomCdb(rand: () => number): Buffer {
  const int = (n: number): number => Math.floor(rand() * n);
  const cdb = Buffer.alloc(16);
  const common = [0x00, 0x03, 0x12, 0x1a, 0x5a, 0x15, 0x55, 0x25, 0x9e, 0x08, 0x0a, 0x28, 0x2a, 0xa8, 0xaa, 0x88, 0x8a, 0x2f, 0x35, 0x91, 0x41, 0x93, 0x42, 0x89, 0x5e, 0x5f, 0x16, 0x17, 0xa0, 0xa3, 0x1b, 0x1e, 0x34, 0x2e, 0x8e];
  cdb[0] = rand() < 0.9 ? common[int(common.length)] : int(256);
  for (let i = 1; i < 16; i++) if (rand() < 0.4) cdb[i] = rand() < 0.5 ? int(256) : [0, 1, 0xff, 0x80][int(4)];
  // Keep transfer lengths small most of the time so that real I/O runs instead of 21/00.
  if (rand() < 0.7) {
    cdb[2] = cdb[3] = cdb[4] = 0;
    cdb[6] = cdb[7] = 0;
    cdb[10] = cdb[11] = cdb[12] = 0;
  }
  return cdb;
}
