// WRITE SAME(10) and (16) (SBC-4 5.48, 5.49). One block of data-out (or none,
// with NDOB) is written to every block of the range. An all-zero block goes to
// backend.writeZeroes, which deallocates when UNMAP is set and the LU is thin
// (LBPRZ makes that equivalent); any other pattern is repeated into a
// page-aligned scratch buffer (scratch.ts) and written in chunks.
import { Opcode } from '../../../protocol/scsi/opcodes.js';
import { checkRange, protectField } from '../cdb-fields.js';
import { dataOut, defineCommand, noData, type CommandEntry } from '../command-spec.js';
import type { LogicalUnit } from '../logical-unit.js';
import { good, invalidCdb, isFailure } from '../outcome.js';
import { SLOT_BYTES, withScratch } from '../scratch.js';
import { io as backendIo } from '../sense-map.js';

interface WriteSameParams {
  lba: number;
  blocks: number;
  unmap: boolean;
  ndob: boolean;
}

function isZero(b: Buffer): boolean {
  for (let i = 0; i < b.length; i++) if (b[i] !== 0) return false;
  return true;
}

async function writePattern(lu: LogicalUnit, block: Buffer, lba: number, blocks: number): Promise<void> {
  const bs = lu.blockSize;
  const perChunk = Math.max(1, Math.floor(SLOT_BYTES / bs));
  const fua = !lu.modes.wce;
  if (lu.backend.writeSame !== undefined) {
    await backendIo('write', lu.backend.writeSame(block.subarray(0, bs), lba * bs, blocks * bs, { fua }));
    return;
  }
  await withScratch(Math.min(blocks, perChunk) * bs, async (chunk) => {
    for (let i = 0; i < chunk.length; i += bs) block.copy(chunk, i, 0, bs);
    for (let done = 0; done < blocks; ) {
      const n = Math.min(perChunk, blocks - done);
      await backendIo('write', lu.backend.write(chunk.subarray(0, n * bs), (lba + done) * bs, { fua }));
      done += n;
    }
  });
}

function writeSame(op: number, name: string, sixteen: boolean): CommandEntry {
  const usage = sixteen
    ? [op, 0xf9, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0x00]
    : [op, 0xf8, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, 0x00];
  return defineCommand<WriteSameParams>({
    opcode: op,
    name,
    cdbLength: sixteen ? 16 : 10,
    usage,
    pr: 'write',
    access: 'write',
    exactDataOut: true,
    parse(cdb, lu) {
      if (protectField(cdb) !== 0) return invalidCdb(1, 7);
      // ANCHOR needs anchored-state tracking rblk does not have.
      if (cdb[1] & 0x10) return invalidCdb(1, 4);
      // PBDATA and LBDATA are obsolete; NDOB exists only in the 16-byte CDB.
      if (cdb[1] & 0x04) return invalidCdb(1, 2);
      if (cdb[1] & 0x02) return invalidCdb(1, 1);
      if (!sixteen && cdb[1] & 0x01) return invalidCdb(1, 0);
      // UNMAP on a fully provisioned LU: VPD B2h says LBPWS and LBPWS10 are clear, so it is a
      // field this LU does not take, as Linux's target answers and libiscsi's UnmapVPD tests expect.
      if (cdb[1] & 0x08 && !lu.thin) return invalidCdb(1, 3);
      const lba = sixteen ? cdb.readBigUInt64BE(2) : cdb.readUInt32BE(2);
      const blocks = sixteen ? cdb.readUInt32BE(10) : cdb.readUInt16BE(7);
      const lengthAt = sixteen ? 10 : 7;
      // WSNZ is clear in VPD B0h: zero blocks means from the LBA to the end of
      // the medium (SBC-4 5.49.1), within MAXIMUM WRITE SAME LENGTH like any other
      // count. The range is checked first, so an LBA past the end is 05 21/00.
      const start = checkRange(lu, lba, blocks);
      if (isFailure(start)) return start;
      const count = blocks === 0 ? lu.blocks - start : blocks;
      if (count > lu.limits.maxWriteSameBlocks) return invalidCdb(lengthAt);
      const params = { lba: start, blocks: count, unmap: (cdb[1] & 0x08) !== 0, ndob: sixteen && (cdb[1] & 0x01) !== 0 };
      return params.ndob ? noData(params) : dataOut(lu.blockSize, params);
    },
    async execute(p, io) {
      const lu = io.lu;
      if (p.blocks === 0) return good();
      const start = checkRange(lu, p.lba, p.blocks);
      if (isFailure(start)) return start;
      return lu.rangeLock.hold(io.nexus, p.lba, p.lba + p.blocks, false, async () => {
        const block = p.ndob ? undefined : io.data.subarray(0, lu.blockSize);
        const off = p.lba * lu.blockSize;
        const len = p.blocks * lu.blockSize;
        // With UNMAP (a thin LU: parse refused it on a thick one) the blocks are deallocated whatever
        // the data block holds (SBC-4 5.50: UNMAP asks for an unmap; a read then returns zeroes, LBPRZ),
        // as Linux's target does.
        if (block === undefined || isZero(block) || (p.unmap && lu.thin)) {
          await backendIo(p.unmap && lu.thin ? 'discard' : 'write', lu.backend.writeZeroes(off, len, p.unmap && lu.thin));
          if (!lu.modes.wce) await backendIo('flush', lu.backend.flush());
        } else {
          await writePattern(lu, block, p.lba, p.blocks);
        }
        return good();
      });
    },
  });
}

export const writeSame10 = writeSame(Opcode.WRITE_SAME_10, 'WRITE SAME(10)', false);
export const writeSame16 = writeSame(Opcode.WRITE_SAME_16, 'WRITE SAME(16)', true);
