// READ CAPACITY parameter data: (10) in SBC-4 5.20.2, (16) in SBC-4 5.21.2.

export interface Capacity10 {
  /** 0xFFFFFFFF means "too large: use READ CAPACITY(16)". */
  lastLba: number;
  blockSize: number;
}

export function parseReadCapacity10(b: Buffer): Capacity10 {
  if (b.length < 8) throw new RangeError(`READ CAPACITY(10) data is ${b.length} bytes; 8 are needed`);
  return { lastLba: b.readUInt32BE(0), blockSize: b.readUInt32BE(4) };
}

export interface Capacity16 {
  lastLba: bigint;
  /** lastLba + 1. */
  blocks: bigint;
  blockSize: number;
  protectionEnabled: boolean;
  protectionType: number;
  /** Logical blocks per physical block, as a power of two. */
  physicalBlockExponent: number;
  /** Logical block provisioning management enabled (thin). */
  lbpme: boolean;
  /** Unmapped blocks read as zero. */
  lbprz: boolean;
  lowestAlignedLba: number;
}

export function parseReadCapacity16(b: Buffer): Capacity16 {
  if (b.length < 16) throw new RangeError(`READ CAPACITY(16) data is ${b.length} bytes; at least 16 are needed`);
  const lastLba = b.readBigUInt64BE(0);
  return {
    lastLba,
    blocks: lastLba + 1n,
    blockSize: b.readUInt32BE(8),
    protectionEnabled: (b[12] & 0x01) !== 0,
    protectionType: (b[12] >> 1) & 0x07,
    physicalBlockExponent: b[13] & 0x0f,
    lbpme: (b[14] & 0x80) !== 0,
    lbprz: (b[14] & 0x40) !== 0,
    lowestAlignedLba: ((b[14] & 0x3f) << 8) | b[15],
  };
}
