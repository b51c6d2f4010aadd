// EXTENDED COPY(LID1) (SPC-4 6.4, opcode 83h service action 00h) and RECEIVE
// COPY RESULTS (SPC-4 6.18: COPY STATUS 00h, OPERATING PARAMETERS 03h), with
// this logical unit as the only copy target: identification descriptors
// (E4h) that name it by its NAA designator (VPD 83h), block-to-block segment
// descriptors (02h), no inline or held data. The copy moves blocks through a
// scratch buffer, the source range locked shared and the destination
// exclusive (one exclusive lock over both when they overlap), the native fast
// path held off (it writes). The whole parameter list is checked before the
// first block moves; a segment that fails stops the copy there (COPY ABORTED,
// the segments before it stay copied, SPC-4 5.17.4.4).
import { Opcode } from '../../../protocol/scsi/opcodes.js';
import {
  COPY_ABORTED,
  COPY_TARGET_DEVICE_NOT_REACHABLE,
  PARAMETER_LIST_LENGTH_ERROR,
  TOO_MANY_SEGMENT_DESCRIPTORS,
  TOO_MANY_TARGET_DESCRIPTORS,
  UNSUPPORTED_SEGMENT_DESCRIPTOR_TYPE_CODE,
  UNSUPPORTED_TARGET_DESCRIPTOR_TYPE_CODE,
} from '../../../protocol/scsi/sense-codes.js';
import { dataIn, dataOut, defineCommand } from '../command-spec.js';
import type { LogicalUnit } from '../logical-unit.js';
import { nexusKey } from '../nexus.js';
import { check, good, invalidCdb, invalidParameter, isFailure, respond, type Failure } from '../outcome.js';
import { holding, type Release } from '../range-lock.js';
import { SLOT_BYTES, withScratch } from '../scratch.js';
import { io as backendIo } from '../sense-map.js';

/** What RECEIVE COPY RESULTS / OPERATING PARAMETERS advertises and the parser enforces. */
export const COPY_LIMITS = {
  maxTargetDescriptors: 2,
  maxSegmentDescriptors: 16,
  maxDescriptorListLength: 1024,
} as const;

const HEADER = 16;
const IDENTIFICATION_DESCRIPTOR = 0xe4;
const TARGET_DESCRIPTOR_LENGTH = 32;
const BLOCK_TO_BLOCK = 0x02;
/** DESCRIPTOR LENGTH of a block-to-block segment descriptor: its 28 bytes less the first 4. */
const BLOCK_TO_BLOCK_LENGTH = 0x18;
const DESIGNATOR_NAA = 3;
const COPY_STATUS = 0x00;
const OPERATING_PARAMETERS = 0x03;

interface Segment {
  readonly at: number;
  readonly src: number;
  readonly dst: number;
  readonly blocks: number;
  readonly srcLba: bigint;
  readonly dstLba: bigint;
}

interface CopyList {
  readonly listId: number;
  /** LIST ID USAGE 00b and 01b: the outcome is held for RECEIVE COPY RESULTS. */
  readonly hold: boolean;
  /** Per target descriptor: whether it names this LU, a disk of this block length. */
  readonly reachable: readonly boolean[];
  readonly segments: readonly Segment[];
}

/** Parses and checks the whole list (SPC-4 6.4.3); a Failure says what is wrong with it. */
export function parseCopyList(list: Buffer, lu: LogicalUnit): CopyList | Failure {
  if (list.length < HEADER) return check(PARAMETER_LIST_LENGTH_ERROR);
  const targetsLength = list.readUInt16BE(2);
  const segmentsLength = list.readUInt32BE(8);
  const inlineLength = list.readUInt32BE(12);
  if (HEADER + targetsLength + segmentsLength + inlineLength > list.length) return check(PARAMETER_LIST_LENGTH_ERROR);
  if (targetsLength + segmentsLength > COPY_LIMITS.maxDescriptorListLength) return check(PARAMETER_LIST_LENGTH_ERROR);
  // MAXIMUM INLINE DATA LENGTH is 0.
  if (inlineLength !== 0) return invalidParameter(12);
  if (targetsLength % TARGET_DESCRIPTOR_LENGTH !== 0) return invalidParameter(2);
  const targets = targetsLength / TARGET_DESCRIPTOR_LENGTH;
  if (targets > COPY_LIMITS.maxTargetDescriptors) return check(TOO_MANY_TARGET_DESCRIPTORS);
  const reachable: boolean[] = [];
  for (let i = 0; i < targets; i++) {
    const at = HEADER + i * TARGET_DESCRIPTOR_LENGTH;
    const d = list.subarray(at, at + TARGET_DESCRIPTOR_LENGTH);
    if (d[0] !== IDENTIFICATION_DESCRIPTOR) return check(UNSUPPORTED_TARGET_DESCRIPTOR_TYPE_CODE);
    // LU ID TYPE and NUL are ignored (SPC-4 6.4.5.6: obsolete), as for a version 6 device.
    const designatorType = d[5] & 0x0f;
    const association = (d[5] >> 4) & 0x03;
    const length = d[7];
    if (length > 20) return invalidParameter(at + 7);
    const designator = d.subarray(8, 8 + length);
    const peripheral = d[1] & 0x1f;
    const blockLength = d.readUIntBE(29, 3);
    reachable.push(designatorType === DESIGNATOR_NAA && association === 0 && designator.equals(lu.naa) && peripheral === 0 && blockLength === lu.blockSize);
  }
  const spans: { at: number; type: number; length: number }[] = [];
  for (let at = HEADER + targetsLength; at < HEADER + targetsLength + segmentsLength; ) {
    if (at + 4 > HEADER + targetsLength + segmentsLength) return check(PARAMETER_LIST_LENGTH_ERROR);
    const length = 4 + list.readUInt16BE(at + 2);
    if (at + length > HEADER + targetsLength + segmentsLength) return check(PARAMETER_LIST_LENGTH_ERROR);
    spans.push({ at, type: list[at], length });
    at += length;
  }
  if (spans.length > COPY_LIMITS.maxSegmentDescriptors) return check(TOO_MANY_SEGMENT_DESCRIPTORS);
  const segments: Segment[] = [];
  for (const s of spans) {
    if (s.type !== BLOCK_TO_BLOCK) return check(UNSUPPORTED_SEGMENT_DESCRIPTOR_TYPE_CODE);
    if (s.length !== 4 + BLOCK_TO_BLOCK_LENGTH) return invalidParameter(s.at + 2);
    segments.push({
      at: s.at,
      src: list.readUInt16BE(s.at + 4),
      dst: list.readUInt16BE(s.at + 6),
      blocks: list.readUInt16BE(s.at + 10),
      srcLba: list.readBigUInt64BE(s.at + 12),
      dstLba: list.readBigUInt64BE(s.at + 20),
    });
  }
  const usage = (list[1] >> 3) & 0x03;
  return { listId: list[0], hold: usage === 0 || usage === 1, reachable, segments };
}

function inRange(lu: LogicalUnit, lba: bigint, blocks: number): boolean {
  return lba + BigInt(blocks) <= BigInt(lu.blocks);
}

/** Locks for a copy from [src, src+n) to [dst, dst+n): ascending LBA order, one lock when they overlap. */
async function lockCopy(lu: LogicalUnit, owner: object, src: number, dst: number, n: number): Promise<Release> {
  if (src < dst + n && dst < src + n) return lu.rangeLock.acquire(owner, Math.min(src, dst), Math.max(src, dst) + n, true);
  const first = src < dst ? await lu.rangeLock.acquire(owner, src, src + n, false) : await lu.rangeLock.acquire(owner, dst, dst + n, true);
  let second: Release;
  try {
    second = src < dst ? await lu.rangeLock.acquire(owner, dst, dst + n, true) : await lu.rangeLock.acquire(owner, src, src + n, false);
  } catch (e) {
    first(); // refused: the owner's connection was lost meanwhile (range-lock.ts fence)
    throw e;
  }
  return () => {
    second();
    first();
  };
}

export const extendedCopy = defineCommand<{ length: number }>({
  opcode: Opcode.EXTENDED_COPY,
  serviceAction: 0x00,
  name: 'EXTENDED COPY(LID1)',
  cdbLength: 16,
  usage: [Opcode.EXTENDED_COPY, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0x00],
  pr: 'write',
  access: 'write',
  exclusive: true,
  parse(cdb) {
    const length = cdb.readUInt32BE(10);
    return dataOut(length, { length });
  },
  async execute(p, io) {
    // No list: nothing to copy (SPC-4 6.4.1).
    if (p.length === 0) return good();
    const lu = io.lu;
    const parsed = parseCopyList(io.data.subarray(0, p.length), lu);
    if (isFailure(parsed)) return parsed;
    const who = nexusKey(io.nexus);
    let processed = 0;
    let bytes = 0;
    const finish = (ok: boolean): void => {
      if (parsed.hold) lu.copyResults.hold(who, parsed.listId, { status: ok ? 0x01 : 0x02, segmentsProcessed: processed, bytes });
    };
    for (const s of parsed.segments) {
      if (s.src >= parsed.reachable.length || s.dst >= parsed.reachable.length || !parsed.reachable[s.src] || !parsed.reachable[s.dst]) {
        finish(false);
        return check(COPY_TARGET_DEVICE_NOT_REACHABLE);
      }
      if (!inRange(lu, s.srcLba, s.blocks) || !inRange(lu, s.dstLba, s.blocks)) {
        finish(false);
        return check(COPY_ABORTED);
      }
      const src = Number(s.srcLba);
      const dst = Number(s.dstLba);
      await holding(lockCopy(lu, io.nexus, src, dst, s.blocks), async () => {
        const chunk = Math.max(1, Math.floor(SLOT_BYTES / lu.blockSize));
        // Front to back, or back to front when the destination starts inside the source, so that no block is read after it was overwritten.
        const backwards = dst > src && dst < src + s.blocks;
        for (let done = 0; done < s.blocks; ) {
          const n = Math.min(chunk, s.blocks - done);
          const from = backwards ? src + s.blocks - done - n : src + done;
          const to = backwards ? dst + s.blocks - done - n : dst + done;
          await withScratch(n * lu.blockSize, async (buf) => {
            await backendIo('read', lu.backend.read(buf, from * lu.blockSize));
            await backendIo('write', lu.backend.write(buf, to * lu.blockSize, { fua: !lu.modes.wce }));
          });
          done += n;
          bytes += n * lu.blockSize;
        }
      });
      processed++;
    }
    finish(true);
    return good();
  },
});

function copyStatus(lu: LogicalUnit, who: string, listId: number): Buffer | undefined {
  const r = lu.copyResults.get(who, listId);
  if (r === undefined) return undefined;
  const b = Buffer.alloc(12);
  b.writeUInt32BE(8, 0);
  // HDD 0: no held data; COPY MANAGER STATUS; SEGMENTS PROCESSED; TRANSFER COUNT UNITS 00h: bytes.
  b[4] = r.status;
  b.writeUInt16BE(Math.min(r.segmentsProcessed, 0xffff), 5);
  b.writeUInt32BE(Math.min(r.bytes, 0xffffffff), 8);
  return b;
}

function operatingParameters(): Buffer {
  const codes = [BLOCK_TO_BLOCK, IDENTIFICATION_DESCRIPTOR];
  const b = Buffer.alloc(44 + codes.length);
  b.writeUInt32BE(b.length - 4, 0);
  // SNLID 0: a list identifier is required to hold results.
  b.writeUInt16BE(COPY_LIMITS.maxTargetDescriptors, 8);
  b.writeUInt16BE(COPY_LIMITS.maxSegmentDescriptors, 10);
  b.writeUInt32BE(COPY_LIMITS.maxDescriptorListLength, 12);
  // MAXIMUM SEGMENT LENGTH: the 16-bit block count of a segment, in 512-byte blocks at least.
  b.writeUInt32BE(0xffff * 512, 16);
  // No inline data, held data or stream devices (20-31); one copy at a time per command.
  b.writeUInt16BE(1, 34);
  b[36] = 1;
  // Granularities as log2 bytes: 512.
  b[37] = 9;
  b[38] = 9;
  b[39] = 9;
  b[43] = codes.length;
  codes.forEach((c, i) => (b[44 + i] = c));
  return b;
}

interface RcrParams {
  readonly listId: number;
  readonly allocationLength: number;
}

function receiveCopyResults(serviceAction: number, name: string): ReturnType<typeof defineCommand<RcrParams>> {
  return defineCommand<RcrParams>({
    opcode: Opcode.RECEIVE_COPY_RESULTS,
    serviceAction,
    name,
    cdbLength: 16,
    usage: [Opcode.RECEIVE_COPY_RESULTS, serviceAction, serviceAction === COPY_STATUS ? 0xff : 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0x00],
    pr: 'read',
    access: 'read',
    parse(cdb) {
      const allocationLength = cdb.readUInt32BE(10);
      return dataIn(allocationLength, { listId: cdb[2], allocationLength });
    },
    execute(p, io) {
      if (serviceAction === OPERATING_PARAMETERS) return respond(io.data, operatingParameters(), p.allocationLength);
      const status = copyStatus(io.lu, nexusKey(io.nexus), p.listId);
      // No held results for this list identifier (SPC-4 6.18.1).
      if (status === undefined) return invalidCdb(2);
      return respond(io.data, status, p.allocationLength);
    },
  });
}

export const receiveCopyStatus = receiveCopyResults(COPY_STATUS, 'RECEIVE COPY RESULTS / COPY STATUS');
export const receiveCopyOperatingParameters = receiveCopyResults(OPERATING_PARAMETERS, 'RECEIVE COPY RESULTS / OPERATING PARAMETERS');
