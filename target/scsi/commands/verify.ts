// VERIFY(10)/(12)/(16) (SBC-4 5.33-5.35) and WRITE AND VERIFY(10)/(12)/(16)
// (SBC-4 5.45-5.47). BYTCHK (bits 2:1 of byte 1, SBC-4 table 96) selects:
// 00b read the medium only; 01b compare with NLB blocks of data-out; 11b
// compare every block with one block of data-out. A mismatch is MISCOMPARE
// with INFORMATION = offset into data-out of the first differing byte.
import { Opcode } from '../../../protocol/scsi/opcodes.js';
import { MISCOMPARE_DURING_VERIFY } from '../../../protocol/scsi/sense-codes.js';
import { checkRange, protectField } from '../cdb-fields.js';
import { blockLengthField, dataOut, defineCommand, noData, type CommandEntry } from '../command-spec.js';
import { firstDifference } from './compare-and-write.js';
import type { LogicalUnit } from '../logical-unit.js';
import { check, good, invalidCdb, isFailure, type Outcome } from '../outcome.js';
import { lbaAndLength } from './read-write.js';
import { SLOT_BYTES, withScratch } from '../scratch.js';
import { io as backendIo } from '../sense-map.js';

interface VerifyParams {
  lba: number;
  blocks: number;
  bytchk: number;
}

/**
 * Reads [lba, lba + blocks) in chunks and compares with `expected(offset, n)`
 * (undefined for a medium-only verify). Returns the miscompare offset or -1.
 */
async function readAndCompare(
  lu: LogicalUnit,
  lba: number,
  blocks: number,
  expected: ((offset: number, length: number) => Buffer) | undefined,
): Promise<number> {
  const bs = lu.blockSize;
  const perChunk = Math.max(1, Math.floor(SLOT_BYTES / bs));
  return withScratch(Math.min(blocks, perChunk) * bs, async (scratch) => {
    for (let done = 0; done < blocks; ) {
      const n = Math.min(perChunk, blocks - done);
      const got = scratch.subarray(0, n * bs);
      await backendIo('read', lu.backend.read(got, (lba + done) * bs));
      if (expected) {
        const at = firstDifference(expected(done * bs, n * bs), got);
        if (at >= 0) return done * bs + at;
      }
      done += n;
    }
    return -1;
  });
}

function expectation(data: Buffer, bs: number, bytchk: number): ((offset: number, length: number) => Buffer) | undefined {
  if (bytchk === 1) return (offset, length) => data.subarray(offset, offset + length);
  if (bytchk !== 3) return undefined;
  const one = data.subarray(0, bs);
  return (_offset, length) => {
    const b = Buffer.allocUnsafe(length);
    for (let i = 0; i < length; i += bs) one.copy(b, i);
    return b;
  };
}

type Size = 10 | 12 | 16;

function usage(op: number, size: Size): number[] {
  if (size === 10) return [op, 0xf6, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, 0x00];
  if (size === 12) return [op, 0xf6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0x00];
  return [op, 0xf6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0x00];
}

const LENGTH_AT: Record<Size, number> = { 10: 7, 12: 6, 16: 10 };

function verify(op: number, name: string, size: Size): CommandEntry {
  return defineCommand<VerifyParams>({
    opcode: op,
    name,
    cdbLength: size,
    usage: usage(op, size),
    pr: 'read',
    access: 'read',
    parse(cdb, lu) {
      if (protectField(cdb) !== 0) return invalidCdb(1, 7);
      const bytchk = (cdb[1] >> 1) & 0x3;
      if (bytchk === 2) return invalidCdb(1, 2);
      const { lba, blocks } = lbaAndLength(cdb, size);
      // Data-out is bounded by the transfer limit; a medium-only verify moves no data.
      if (bytchk === 1 && blocks > lu.limits.maxTransferBlocks) return invalidCdb(LENGTH_AT[size]);
      const start = checkRange(lu, lba, blocks);
      if (isFailure(start)) return start;
      const params = { lba: start, blocks, bytchk };
      if (blocks === 0 || bytchk === 0) return noData(params);
      return dataOut((bytchk === 1 ? blocks : 1) * lu.blockSize, params);
    },
    async execute(p, io): Promise<Outcome> {
      if (p.blocks === 0) return good();
      const lu = io.lu;
      return lu.rangeLock.hold(io.nexus, p.lba, p.lba + p.blocks, false, async () => {
        const at = await readAndCompare(lu, p.lba, p.blocks, expectation(io.data, lu.blockSize, p.bytchk));
        return at >= 0 ? check(MISCOMPARE_DURING_VERIFY, { information: at }) : good();
      });
    },
  });
}

function writeAndVerify(op: number, name: string, size: Size): CommandEntry {
  return defineCommand<VerifyParams>({
    opcode: op,
    name,
    cdbLength: size,
    usage: usage(op, size),
    pr: 'write',
    access: 'write',
    transferLengthField: blockLengthField(size),
    parse(cdb, lu) {
      if (protectField(cdb) !== 0) return invalidCdb(1, 7);
      // WRITE AND VERIFY defines BYTCHK 00b and 01b only (SBC-4 table 113).
      const bytchk = (cdb[1] >> 1) & 0x3;
      if (bytchk > 1) return invalidCdb(1, 2);
      const { lba, blocks } = lbaAndLength(cdb, size);
      if (blocks > lu.limits.maxTransferBlocks) return invalidCdb(LENGTH_AT[size]);
      const start = checkRange(lu, lba, blocks);
      if (isFailure(start)) return start;
      return dataOut(blocks * lu.blockSize, { lba: start, blocks, bytchk });
    },
    async execute(p, io): Promise<Outcome> {
      if (p.blocks === 0) return good();
      const lu = io.lu;
      const len = p.blocks * lu.blockSize;
      const data = io.data.subarray(0, len);
      return lu.rangeLock.hold(io.nexus, p.lba, p.lba + p.blocks, false, async () => {
        // The verify reads the medium, so the write must reach it first.
        await backendIo('write', lu.backend.write(data, p.lba * lu.blockSize, { fua: true }));
        const at = await readAndCompare(lu, p.lba, p.blocks, p.bytchk === 1 ? expectation(data, lu.blockSize, 1) : undefined);
        return at >= 0 ? check(MISCOMPARE_DURING_VERIFY, { information: at }) : good();
      });
    },
  });
}

export const verify10 = verify(Opcode.VERIFY_10, 'VERIFY(10)', 10);
export const verify12 = verify(Opcode.VERIFY_12, 'VERIFY(12)', 12);
export const verify16 = verify(Opcode.VERIFY_16, 'VERIFY(16)', 16);
export const writeAndVerify10 = writeAndVerify(Opcode.WRITE_AND_VERIFY_10, 'WRITE AND VERIFY(10)', 10);
export const writeAndVerify12 = writeAndVerify(Opcode.WRITE_AND_VERIFY_12, 'WRITE AND VERIFY(12)', 12);
export const writeAndVerify16 = writeAndVerify(Opcode.WRITE_AND_VERIFY_16, 'WRITE AND VERIFY(16)', 16);
