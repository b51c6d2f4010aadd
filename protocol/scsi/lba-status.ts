// GET LBA STATUS parameter data (SBC-4 5.8.2).

export interface LbaStatusDescriptor {
  lba: bigint;
  blocks: number;
  /** ProvisioningStatus: 0 mapped, 1 deallocated, 2 anchored. */
  status: number;
}

export function parseLbaStatus(b: Buffer): LbaStatusDescriptor[] {
  if (b.length < 8) throw new RangeError(`GET LBA STATUS data is ${b.length} bytes; the header alone is 8`);
  // PARAMETER DATA LENGTH counts the bytes after itself.
  const end = Math.min(b.length, 4 + b.readUInt32BE(0));
  const out: LbaStatusDescriptor[] = [];
  for (let at = 8; at + 16 <= end; at += 16) {
    out.push({ lba: b.readBigUInt64BE(at), blocks: b.readUInt32BE(at + 8), status: b[at + 12] & 0x0f });
  }
  return out;
}
