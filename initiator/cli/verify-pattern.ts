// The block pattern `rblk verify` writes and checks. Each block says where it
// belongs and which run wrote it, and carries its own checksum, so a misplaced
// write (wrong LBA), a stale block (other seed) and a torn or corrupted one
// (bad CRC) are told apart:
//
//   0   8 bytes  magic "RBLKVFY1"
//   8   8 bytes  LBA, big-endian
//   16  4 bytes  seed, big-endian
//   20  4 bytes  block size, big-endian
//   24  ...      filler: xorshift32 stream seeded from (seed, LBA)
//   B-4 4 bytes  CRC-32 (zlib's) of bytes 0..B-4, big-endian
import { crc32 } from 'node:zlib';
import { Xorshift32 } from './prng.js';

const MAGIC = Buffer.from('RBLKVFY1', 'latin1');
const HEADER = 24;
/** The smallest block the layout fits in with some filler (SBC allows 512 and up). */
export const MIN_VERIFY_BLOCK = 64;

/** Writes the pattern block for `lba` into `into` (one block long). */
export function fillBlock(into: Buffer, lba: number, seed: number): void {
  const bs = into.length;
  MAGIC.copy(into, 0);
  into.writeBigUInt64BE(BigInt(lba), 8);
  into.writeUInt32BE(seed >>> 0, 16);
  into.writeUInt32BE(bs, 20);
  // The LBA enters the seed so that two blocks never share a filler.
  const rng = new Xorshift32((seed ^ Math.imul(lba % 0x1_0000_0000, 0x9e3779b1) ^ Math.floor(lba / 0x1_0000_0000)) >>> 0);
  let i = HEADER;
  for (; i + 4 <= bs - 4; i += 4) into.writeUInt32BE(rng.next(), i);
  for (; i < bs - 4; i++) into[i] = rng.next() & 0xff;
  into.writeUInt32BE(crc32(into.subarray(0, bs - 4)), bs - 4);
}

/** Fills a buffer of whole blocks with the pattern, the first block being `firstLba`. */
export function fillBlocks(into: Buffer, blockSize: number, firstLba: number, seed: number): void {
  for (let i = 0; i * blockSize < into.length; i++) fillBlock(into.subarray(i * blockSize, (i + 1) * blockSize), firstLba + i, seed);
}

/** What a block that should carry the pattern holds instead. */
export interface BlockMismatch {
  lba: number;
  expected: string;
  found: string;
}

function describeHeader(b: Buffer): string {
  const bs = b.length;
  if (b.every((x) => x === 0)) return 'all zeroes';
  if (!b.subarray(0, 8).equals(MAGIC)) return `no verify header (first bytes ${b.subarray(0, 8).toString('hex')})`;
  const stored = b.readUInt32BE(bs - 4);
  const computed = crc32(b.subarray(0, bs - 4));
  const crc = stored === computed ? `crc ${hex(stored)} ok` : `crc ${hex(stored)} bad (computed ${hex(computed)})`;
  return `lba ${b.readBigUInt64BE(8)} seed ${b.readUInt32BE(16)} block size ${b.readUInt32BE(20)} ${crc}`;
}

function hex(n: number): string {
  return `0x${n.toString(16).padStart(8, '0')}`;
}

/**
 * Compares a block read back with the pattern block for its LBA; undefined
 * when they are equal, else a summary of both (header fields, CRC, how many
 * bytes differ and where the first is).
 */
export function checkBlock(found: Buffer, lba: number, seed: number, scratch: Buffer): BlockMismatch | undefined {
  fillBlock(scratch, lba, seed);
  if (found.equals(scratch)) return undefined;
  let first = -1;
  let differ = 0;
  for (let i = 0; i < found.length; i++) {
    if (found[i] !== scratch[i]) {
      differ++;
      if (first < 0) first = i;
    }
  }
  return {
    lba,
    expected: `lba ${lba} seed ${seed >>> 0} crc ${hex(scratch.readUInt32BE(scratch.length - 4))}`,
    found: `${describeHeader(found)}; ${differ} of ${found.length} bytes differ, the first at byte ${first}`,
  };
}
