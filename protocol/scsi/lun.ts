// Eight-byte LUN encoding (SAM-5 4.7): peripheral device addressing for LUNs
// below 256, flat space addressing up to 16383, as Linux int_to_scsilun does.

export const MAX_LUN = 0x3fff;
export const LUN_SIZE = 8;

export function encodeLun(lun: number, out: Buffer = Buffer.alloc(LUN_SIZE), at = 0): Buffer {
  if (!Number.isInteger(lun) || lun < 0 || lun > MAX_LUN) {
    throw new RangeError(`LUN ${lun} is outside 0..${MAX_LUN}`);
  }
  out.fill(0, at, at + LUN_SIZE);
  if (lun < 256) {
    out[at + 1] = lun;
  } else {
    out[at] = 0x40 | (lun >> 8);
    out[at + 1] = lun & 0xff;
  }
  return out;
}

/** The LUN number, or undefined for an address method rblk does not use. */
export function decodeLun(b: Buffer, at = 0): number | undefined {
  if (b.length < at + LUN_SIZE) return undefined;
  for (let i = 2; i < LUN_SIZE; i++) if (b[at + i] !== 0) return undefined;
  const method = b[at] >> 6;
  if (method === 0) return b[at] === 0 ? b[at + 1] : undefined;
  if (method === 1) return ((b[at] & 0x3f) << 8) | b[at + 1];
  return undefined;
}
