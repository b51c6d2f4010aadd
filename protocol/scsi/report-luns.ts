// REPORT LUNS parameter data (SPC-5 6.33.2).
import { decodeLun, LUN_SIZE } from './lun.js';

export interface LunList {
  /** LUN LIST LENGTH / 8: how many the target has, even when the buffer was short. */
  total: number;
  /** The LUNs in the returned bytes, in the target's order. */
  luns: number[];
}

export function parseReportLuns(b: Buffer): LunList {
  if (b.length < 8) throw new RangeError(`REPORT LUNS data is ${b.length} bytes; the header alone is 8`);
  const listLength = b.readUInt32BE(0);
  const end = Math.min(b.length, 8 + listLength);
  const luns: number[] = [];
  for (let at = 8; at + LUN_SIZE <= end; at += LUN_SIZE) {
    const lun = decodeLun(b, at);
    if (lun === undefined) throw new RangeError(`REPORT LUNS entry at ${at} uses an unsupported address method`);
    luns.push(lun);
  }
  return { total: Math.floor(listLength / LUN_SIZE), luns };
}
