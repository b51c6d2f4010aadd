// CDB builders for the initiator (SBC-4 clause 5, SPC-5 clause 6). Each returns
// a Buffer of the command's own length; the wire capsule pads it to 16 bytes.
// Arguments out of a field's range are programming errors and throw RangeError.
import {
  MaintenanceIn,
  Opcode,
  PageControl,
  PrOutFlag,
  ServiceActionIn16,
  type PrTypeCode,
} from './opcodes.js';

export type Lba = number | bigint;

export interface RwOptions {
  /** Force Unit Access (SBC-4 5.11): the write is durable before GOOD. */
  fua?: boolean;
  /** Disable Page Out: a cache-retention hint; the target accepts and ignores it. */
  dpo?: boolean;
}

function uint(name: string, v: number, bits: number): number {
  if (!Number.isInteger(v) || v < 0 || v >= 2 ** bits) {
    throw new RangeError(`${name} ${v} does not fit in ${bits} bits`);
  }
  return v;
}

function lba64(v: Lba): bigint {
  const b = BigInt(v);
  if (b < 0n || b > 0xffffffffffffffffn) throw new RangeError(`LBA ${v} does not fit in 64 bits`);
  return b;
}

function lba32(v: Lba): number {
  const b = lba64(v);
  if (b > 0xffffffffn) throw new RangeError(`LBA ${v} does not fit in 32 bits`);
  return Number(b);
}

function rwFlags(o: RwOptions | undefined): number {
  return (o?.dpo ? 0x10 : 0) | (o?.fua ? 0x08 : 0);
}

export function testUnitReady(): Buffer {
  return Buffer.from([Opcode.TEST_UNIT_READY, 0, 0, 0, 0, 0]);
}

export function requestSense(allocationLength = 252, descriptor = false): Buffer {
  return Buffer.from([Opcode.REQUEST_SENSE, descriptor ? 1 : 0, 0, 0, uint('allocation length', allocationLength, 8), 0]);
}

/** Standard INQUIRY data, or a VPD page when page is given (SPC-5 6.7). */
export function inquiry(allocationLength: number, page?: number): Buffer {
  const c = Buffer.alloc(6);
  c[0] = Opcode.INQUIRY;
  if (page !== undefined) {
    c[1] = 0x01;
    c[2] = uint('page code', page, 8);
  }
  c.writeUInt16BE(uint('allocation length', allocationLength, 16), 3);
  return c;
}

export function readCapacity10(): Buffer {
  const c = Buffer.alloc(10);
  c[0] = Opcode.READ_CAPACITY_10;
  return c;
}

export function readCapacity16(allocationLength = 32): Buffer {
  const c = Buffer.alloc(16);
  c[0] = Opcode.SERVICE_ACTION_IN_16;
  c[1] = ServiceActionIn16.READ_CAPACITY_16;
  c.writeUInt32BE(uint('allocation length', allocationLength, 32), 10);
  return c;
}

export function getLbaStatus(lba: Lba, allocationLength: number): Buffer {
  const c = Buffer.alloc(16);
  c[0] = Opcode.SERVICE_ACTION_IN_16;
  c[1] = ServiceActionIn16.GET_LBA_STATUS;
  c.writeBigUInt64BE(lba64(lba), 2);
  c.writeUInt32BE(uint('allocation length', allocationLength, 32), 10);
  return c;
}

function rw6(op: number, lba: Lba, blocks: number): Buffer {
  const l = lba32(lba);
  uint('LBA', l, 21);
  // A TRANSFER LENGTH of 0 means 256 blocks in the six-byte CDBs (SBC-4 5.12).
  if (!Number.isInteger(blocks) || blocks < 1 || blocks > 256) throw new RangeError(`blocks ${blocks} outside 1..256`);
  return Buffer.from([op, (l >> 16) & 0x1f, (l >> 8) & 0xff, l & 0xff, blocks & 0xff, 0]);
}

function rw10(op: number, lba: Lba, blocks: number, o?: RwOptions): Buffer {
  const c = Buffer.alloc(10);
  c[0] = op;
  c[1] = rwFlags(o);
  c.writeUInt32BE(lba32(lba), 2);
  c.writeUInt16BE(uint('blocks', blocks, 16), 7);
  return c;
}

function rw12(op: number, lba: Lba, blocks: number, o?: RwOptions): Buffer {
  const c = Buffer.alloc(12);
  c[0] = op;
  c[1] = rwFlags(o);
  c.writeUInt32BE(lba32(lba), 2);
  c.writeUInt32BE(uint('blocks', blocks, 32), 6);
  return c;
}

function rw16(op: number, lba: Lba, blocks: number, o?: RwOptions): Buffer {
  const c = Buffer.alloc(16);
  c[0] = op;
  c[1] = rwFlags(o);
  c.writeBigUInt64BE(lba64(lba), 2);
  c.writeUInt32BE(uint('blocks', blocks, 32), 10);
  return c;
}

export const read6 = (lba: Lba, blocks: number): Buffer => rw6(Opcode.READ_6, lba, blocks);
export const write6 = (lba: Lba, blocks: number): Buffer => rw6(Opcode.WRITE_6, lba, blocks);
export const read10 = (lba: Lba, blocks: number, o?: RwOptions): Buffer => rw10(Opcode.READ_10, lba, blocks, o);
export const write10 = (lba: Lba, blocks: number, o?: RwOptions): Buffer => rw10(Opcode.WRITE_10, lba, blocks, o);
export const read12 = (lba: Lba, blocks: number, o?: RwOptions): Buffer => rw12(Opcode.READ_12, lba, blocks, o);
export const write12 = (lba: Lba, blocks: number, o?: RwOptions): Buffer => rw12(Opcode.WRITE_12, lba, blocks, o);
export const read16 = (lba: Lba, blocks: number, o?: RwOptions): Buffer => rw16(Opcode.READ_16, lba, blocks, o);
export const write16 = (lba: Lba, blocks: number, o?: RwOptions): Buffer => rw16(Opcode.WRITE_16, lba, blocks, o);

/** EXTENDED COPY(LID1) (SPC-4 6.4): the parameter list length at bytes 10-13. */
export function extendedCopy(parameterListLength: number): Buffer {
  const c = Buffer.alloc(16);
  c[0] = Opcode.EXTENDED_COPY;
  c.writeUInt32BE(uint('length', parameterListLength, 32), 10);
  return c;
}

/** RECEIVE COPY RESULTS (SPC-4 6.18): 00h COPY STATUS, 03h OPERATING PARAMETERS. */
export function receiveCopyResults(serviceAction: number, listId: number, allocationLength: number): Buffer {
  const c = Buffer.alloc(16);
  c[0] = Opcode.RECEIVE_COPY_RESULTS;
  c[1] = serviceAction & 0x1f;
  c[2] = uint('listId', listId, 8);
  c.writeUInt32BE(uint('allocationLength', allocationLength, 32), 10);
  return c;
}

export interface CopySegment {
  blocks: number;
  srcLba: number | bigint;
  dstLba: number | bigint;
  /** Target descriptor indexes; 0 by default. */
  src?: number;
  dst?: number;
}

/**
 * An EXTENDED COPY(LID1) parameter list (SPC-4 6.4.3): one identification
 * target descriptor (E4h) per designator, each naming an LU by its 16-byte
 * NAA designator, and block-to-block segment descriptors (02h).
 */
export function extendedCopyList(o: { listId: number; listIdUsage?: number; targets: Buffer[]; blockSize: number; segments: CopySegment[] }): Buffer {
  const t = Buffer.alloc(32 * o.targets.length);
  o.targets.forEach((naa, i) => {
    const d = t.subarray(32 * i);
    d[0] = 0xe4;
    d[4] = 0x01; // code set binary
    d[5] = 0x03; // association LU, designator type NAA
    d[7] = naa.length;
    naa.copy(d, 8);
    d.writeUIntBE(o.blockSize, 29, 3);
  });
  const s = Buffer.alloc(28 * o.segments.length);
  o.segments.forEach((g, i) => {
    const d = s.subarray(28 * i);
    d[0] = 0x02;
    d.writeUInt16BE(0x18, 2);
    d.writeUInt16BE(g.src ?? 0, 4);
    d.writeUInt16BE(g.dst ?? 0, 6);
    d.writeUInt16BE(uint('blocks', g.blocks, 16), 10);
    d.writeBigUInt64BE(BigInt(g.srcLba), 12);
    d.writeBigUInt64BE(BigInt(g.dstLba), 20);
  });
  const h = Buffer.alloc(16);
  h[0] = o.listId;
  h[1] = ((o.listIdUsage ?? 0) & 3) << 3;
  h.writeUInt16BE(t.length, 2);
  h.writeUInt32BE(s.length, 8);
  return Buffer.concat([h, t, s]);
}

/** WRITE ATOMIC(16) (SBC-4 5.48): a 16-bit TRANSFER LENGTH at byte 12, ATOMIC BOUNDARY at 10. */
export function writeAtomic16(lba: Lba, blocks: number, o?: RwOptions & { boundary?: number }): Buffer {
  const c = Buffer.alloc(16);
  c[0] = Opcode.WRITE_ATOMIC_16;
  c[1] = rwFlags(o);
  c.writeBigUInt64BE(lba64(lba), 2);
  c.writeUInt16BE(uint('boundary', o?.boundary ?? 0, 16), 10);
  c.writeUInt16BE(uint('blocks', blocks, 16), 12);
  return c;
}

function fits10(lba: Lba, blocks: number): boolean {
  return BigInt(lba) + BigInt(blocks) <= 0x100000000n && blocks <= 0xffff;
}

/** READ(10) when the LBA and length fit, otherwise READ(16), as Linux sd chooses. */
export function read(lba: Lba, blocks: number, o?: RwOptions): Buffer {
  return fits10(lba, blocks) ? read10(lba, blocks, o) : read16(lba, blocks, o);
}

export function write(lba: Lba, blocks: number, o?: RwOptions): Buffer {
  return fits10(lba, blocks) ? write10(lba, blocks, o) : write16(lba, blocks, o);
}

export interface RangeOptions {
  lba?: Lba;
  /** 0 means "to the end of the medium" for SYNCHRONIZE CACHE and PRE-FETCH. */
  blocks?: number;
  immed?: boolean;
}

export function synchronizeCache10(o: RangeOptions = {}): Buffer {
  const c = Buffer.alloc(10);
  c[0] = Opcode.SYNCHRONIZE_CACHE_10;
  c[1] = o.immed ? 0x02 : 0;
  c.writeUInt32BE(lba32(o.lba ?? 0), 2);
  c.writeUInt16BE(uint('blocks', o.blocks ?? 0, 16), 7);
  return c;
}

export function synchronizeCache16(o: RangeOptions = {}): Buffer {
  const c = Buffer.alloc(16);
  c[0] = Opcode.SYNCHRONIZE_CACHE_16;
  c[1] = o.immed ? 0x02 : 0;
  c.writeBigUInt64BE(lba64(o.lba ?? 0), 2);
  c.writeUInt32BE(uint('blocks', o.blocks ?? 0, 32), 10);
  return c;
}

export function prefetch10(o: RangeOptions = {}): Buffer {
  const c = synchronizeCache10(o);
  c[0] = Opcode.PRE_FETCH_10;
  return c;
}

export function prefetch16(o: RangeOptions = {}): Buffer {
  const c = synchronizeCache16(o);
  c[0] = Opcode.PRE_FETCH_16;
  return c;
}

export interface WriteSameOptions {
  /** Deallocate where the data is zero and the LU is thin (SBC-4 5.49). */
  unmap?: boolean;
  anchor?: boolean;
  /** No data-out buffer: the block is all zeroes (WRITE SAME(16) only). */
  ndob?: boolean;
}

export function writeSame10(lba: Lba, blocks: number, o: WriteSameOptions = {}): Buffer {
  if (o.ndob) throw new RangeError('NDOB exists only in WRITE SAME(16)');
  const c = Buffer.alloc(10);
  c[0] = Opcode.WRITE_SAME_10;
  c[1] = (o.anchor ? 0x10 : 0) | (o.unmap ? 0x08 : 0);
  c.writeUInt32BE(lba32(lba), 2);
  c.writeUInt16BE(uint('blocks', blocks, 16), 7);
  return c;
}

export function writeSame16(lba: Lba, blocks: number, o: WriteSameOptions = {}): Buffer {
  const c = Buffer.alloc(16);
  c[0] = Opcode.WRITE_SAME_16;
  c[1] = (o.anchor ? 0x10 : 0) | (o.unmap ? 0x08 : 0) | (o.ndob ? 0x01 : 0);
  c.writeBigUInt64BE(lba64(lba), 2);
  c.writeUInt32BE(uint('blocks', blocks, 32), 10);
  return c;
}

export interface UnmapRange {
  lba: Lba;
  blocks: number;
}

export function unmap(parameterListLength: number): Buffer {
  const c = Buffer.alloc(10);
  c[0] = Opcode.UNMAP;
  c.writeUInt16BE(uint('parameter list length', parameterListLength, 16), 7);
  return c;
}

/** The UNMAP parameter list (SBC-4 5.32.2): an 8-byte header and 16 bytes per range. */
export function unmapParameterList(ranges: readonly UnmapRange[]): Buffer {
  const p = Buffer.alloc(8 + 16 * ranges.length);
  p.writeUInt16BE(uint('UNMAP data length', p.length - 2, 16), 0);
  p.writeUInt16BE(16 * ranges.length, 2);
  ranges.forEach((r, i) => {
    p.writeBigUInt64BE(lba64(r.lba), 8 + 16 * i);
    p.writeUInt32BE(uint('blocks', r.blocks, 32), 16 + 16 * i);
  });
  return p;
}

/** COMPARE AND WRITE (SBC-4 5.3): data-out is the verify blocks then the write blocks. */
export function compareAndWrite(lba: Lba, blocks: number, o?: RwOptions): Buffer {
  const c = Buffer.alloc(16);
  c[0] = Opcode.COMPARE_AND_WRITE;
  c[1] = rwFlags(o);
  c.writeBigUInt64BE(lba64(lba), 2);
  c[13] = uint('blocks', blocks, 8);
  return c;
}

export interface VerifyOptions {
  /** 0: medium only; 1: compare blocks of data-out; 3: compare one block against each (SBC-4 5.41). */
  bytchk?: 0 | 1 | 3;
  dpo?: boolean;
}

function verifyFlags(o: VerifyOptions | undefined): number {
  return (o?.dpo ? 0x10 : 0) | (((o?.bytchk ?? 0) & 0x3) << 1);
}

export function verify10(lba: Lba, blocks: number, o?: VerifyOptions): Buffer {
  const c = rw10(Opcode.VERIFY_10, lba, blocks);
  c[1] = verifyFlags(o);
  return c;
}

export function verify12(lba: Lba, blocks: number, o?: VerifyOptions): Buffer {
  const c = rw12(Opcode.VERIFY_12, lba, blocks);
  c[1] = verifyFlags(o);
  return c;
}

export function verify16(lba: Lba, blocks: number, o?: VerifyOptions): Buffer {
  const c = rw16(Opcode.VERIFY_16, lba, blocks);
  c[1] = verifyFlags(o);
  return c;
}

export interface WriteVerifyOptions {
  /** 0: verify the medium; 1: also compare what was read back (SBC-4 5.45). */
  bytchk?: 0 | 1;
  dpo?: boolean;
}

export function writeAndVerify10(lba: Lba, blocks: number, o?: WriteVerifyOptions): Buffer {
  const c = rw10(Opcode.WRITE_AND_VERIFY_10, lba, blocks);
  c[1] = verifyFlags(o);
  return c;
}

export function writeAndVerify12(lba: Lba, blocks: number, o?: WriteVerifyOptions): Buffer {
  const c = rw12(Opcode.WRITE_AND_VERIFY_12, lba, blocks);
  c[1] = verifyFlags(o);
  return c;
}

export function writeAndVerify16(lba: Lba, blocks: number, o?: WriteVerifyOptions): Buffer {
  const c = rw16(Opcode.WRITE_AND_VERIFY_16, lba, blocks);
  c[1] = verifyFlags(o);
  return c;
}

export interface ModeSenseOptions {
  page: number;
  subpage?: number;
  pageControl?: (typeof PageControl)[keyof typeof PageControl];
  /** Disable block descriptors. */
  dbd?: boolean;
  allocationLength: number;
}

export function modeSense6(o: ModeSenseOptions): Buffer {
  const c = Buffer.alloc(6);
  c[0] = Opcode.MODE_SENSE_6;
  c[1] = o.dbd ? 0x08 : 0;
  c[2] = ((o.pageControl ?? PageControl.CURRENT) << 6) | uint('page code', o.page, 6);
  c[3] = uint('subpage', o.subpage ?? 0, 8);
  c[4] = uint('allocation length', o.allocationLength, 8);
  return c;
}

export function modeSense10(o: ModeSenseOptions & { llbaa?: boolean }): Buffer {
  const c = Buffer.alloc(10);
  c[0] = Opcode.MODE_SENSE_10;
  c[1] = (o.llbaa ? 0x10 : 0) | (o.dbd ? 0x08 : 0);
  c[2] = ((o.pageControl ?? PageControl.CURRENT) << 6) | uint('page code', o.page, 6);
  c[3] = uint('subpage', o.subpage ?? 0, 8);
  c.writeUInt16BE(uint('allocation length', o.allocationLength, 16), 7);
  return c;
}

export interface ModeSelectOptions {
  /** Save pages (SP); rblk has no saved pages and rejects it. */
  save?: boolean;
  /** Page format (PF); SPC-5 pages, set by default. */
  pageFormat?: boolean;
}

export function modeSelect6(parameterListLength: number, o: ModeSelectOptions = {}): Buffer {
  const c = Buffer.alloc(6);
  c[0] = Opcode.MODE_SELECT_6;
  c[1] = (o.pageFormat === false ? 0 : 0x10) | (o.save ? 0x01 : 0);
  c[4] = uint('parameter list length', parameterListLength, 8);
  return c;
}

export function modeSelect10(parameterListLength: number, o: ModeSelectOptions = {}): Buffer {
  const c = Buffer.alloc(10);
  c[0] = Opcode.MODE_SELECT_10;
  c[1] = (o.pageFormat === false ? 0 : 0x10) | (o.save ? 0x01 : 0);
  c.writeUInt16BE(uint('parameter list length', parameterListLength, 16), 7);
  return c;
}

export function reportLuns(allocationLength: number, selectReport = 0): Buffer {
  const c = Buffer.alloc(12);
  c[0] = Opcode.REPORT_LUNS;
  c[2] = uint('select report', selectReport, 8);
  c.writeUInt32BE(uint('allocation length', allocationLength, 32), 6);
  return c;
}

export interface ReportOpcodesOptions {
  reportingOptions?: number;
  opcode?: number;
  serviceAction?: number;
  /** Return command timeouts descriptors. */
  rctd?: boolean;
  allocationLength: number;
}

export function reportSupportedOperationCodes(o: ReportOpcodesOptions): Buffer {
  const c = Buffer.alloc(12);
  c[0] = Opcode.MAINTENANCE_IN;
  c[1] = MaintenanceIn.REPORT_SUPPORTED_OPERATION_CODES;
  c[2] = (o.rctd ? 0x80 : 0) | uint('reporting options', o.reportingOptions ?? 0, 3);
  c[3] = uint('opcode', o.opcode ?? 0, 8);
  c.writeUInt16BE(uint('service action', o.serviceAction ?? 0, 16), 4);
  c.writeUInt32BE(uint('allocation length', o.allocationLength, 32), 6);
  return c;
}

/** REPORT TARGET PORT GROUPS (SPC-4 6.36): MAINTENANCE IN, service action 0Ah; `extended` asks for the extended header. */
export function reportTargetPortGroups(allocationLength: number, extended = false): Buffer {
  const c = Buffer.alloc(12);
  c[0] = Opcode.MAINTENANCE_IN;
  c[1] = (extended ? 0x20 : 0) | MaintenanceIn.REPORT_TARGET_PORT_GROUPS;
  c.writeUInt32BE(uint('allocation length', allocationLength, 32), 6);
  return c;
}

export function persistentReserveIn(serviceAction: number, allocationLength: number): Buffer {
  const c = Buffer.alloc(10);
  c[0] = Opcode.PERSISTENT_RESERVE_IN;
  c[1] = uint('service action', serviceAction, 5);
  c.writeUInt16BE(uint('allocation length', allocationLength, 16), 7);
  return c;
}

export const PR_OUT_PARAMETER_LENGTH = 24;

export function persistentReserveOut(
  serviceAction: number,
  type: PrTypeCode | 0 = 0,
  parameterListLength = PR_OUT_PARAMETER_LENGTH,
): Buffer {
  const c = Buffer.alloc(10);
  c[0] = Opcode.PERSISTENT_RESERVE_OUT;
  c[1] = uint('service action', serviceAction, 5);
  // SCOPE is always LU_SCOPE (0) in SPC-5 (6.17.3).
  c[2] = type & 0x0f;
  c.writeUInt32BE(uint('parameter list length', parameterListLength, 32), 5);
  return c;
}

export interface PrOutParameters {
  key: bigint;
  serviceActionKey?: bigint;
  aptpl?: boolean;
  allTargetPorts?: boolean;
}

/** The basic 24-byte PERSISTENT RESERVE OUT parameter list (SPC-5 6.17.3). */
export function prOutParameterList(p: PrOutParameters): Buffer {
  const b = Buffer.alloc(PR_OUT_PARAMETER_LENGTH);
  b.writeBigUInt64BE(BigInt.asUintN(64, p.key), 0);
  b.writeBigUInt64BE(BigInt.asUintN(64, p.serviceActionKey ?? 0n), 8);
  b[20] = (p.allTargetPorts ? PrOutFlag.ALL_TG_PT : 0) | (p.aptpl ? PrOutFlag.APTPL : 0);
  return b;
}

export function startStopUnit(start: boolean, o: { loej?: boolean; immed?: boolean; powerCondition?: number } = {}): Buffer {
  return Buffer.from([
    Opcode.START_STOP_UNIT,
    o.immed ? 1 : 0,
    0,
    0,
    (uint('power condition', o.powerCondition ?? 0, 4) << 4) | (o.loej ? 0x02 : 0) | (start ? 0x01 : 0),
    0,
  ]);
}

export function preventAllowMediumRemoval(prevent: boolean): Buffer {
  return Buffer.from([Opcode.PREVENT_ALLOW_MEDIUM_REMOVAL, 0, 0, 0, prevent ? 1 : 0, 0]);
}

export function reserve6(): Buffer {
  return Buffer.from([Opcode.RESERVE_6, 0, 0, 0, 0, 0]);
}

export function release6(): Buffer {
  return Buffer.from([Opcode.RELEASE_6, 0, 0, 0, 0, 0]);
}
