// Checks shared by the block commands (SBC-4 4.5, 5.x).
import { LBA_OUT_OF_RANGE } from '../../protocol/scsi/sense-codes.js';
import type { LogicalUnit } from './logical-unit.js';
import { check, type Failure } from './outcome.js';

/**
 * The LBA as a number when [lba, lba + blocks) lies within the medium;
 * otherwise LOGICAL BLOCK ADDRESS OUT OF RANGE (05 21/00), which also covers
 * 64-bit LBAs that wrap. An LBA equal to the capacity passes only with no
 * blocks, as libiscsi's 0-block tests expect.
 */
export function checkRange(lu: LogicalUnit, lba: number | bigint, blocks: number): number | Failure {
  const cap = lu.blocks;
  if (typeof lba === 'bigint') {
    if (lba > BigInt(Number.MAX_SAFE_INTEGER)) return check(LBA_OUT_OF_RANGE);
    lba = Number(lba);
  }
  if (lba > cap || lba + blocks > cap) return check(LBA_OUT_OF_RANGE);
  return lba;
}

/** The protection field (RDPROTECT/WRPROTECT/VRPROTECT) in bits 7:5 of byte 1. */
export function protectField(cdb: Buffer): number {
  return cdb[1] >> 5;
}

/** The CONTROL byte's NACA bit (SAM-5 5.2); rblk does not implement ACA. */
export function nacaSet(cdb: Buffer, cdbLength: number): boolean {
  return (cdb[cdbLength - 1] & 0x04) !== 0;
}
