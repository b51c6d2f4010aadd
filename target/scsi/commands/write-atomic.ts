// WRITE ATOMIC(16) (SBC-4 5.48): the blocks are written all-or-nothing, so no
// command sees some of them new and some old. The write is one backend write
// under an exclusive range lock, with the native fast path held off the LU
// (fast-path-gate.ts): every other command of this process, READ and WRITE
// included, runs wholly before or wholly after it. That is atomic for every
// client of a store rblkd alone writes (a file, a block device, RAM); a store
// other hosts write and that splits writes (RBD) offers no WRITE ATOMIC
// (backend.ts atomicWrites). The limits are those of VPD B0h (vpd.ts): LBA and
// length whole physical blocks, length at most MAXIMUM ATOMIC TRANSFER LENGTH,
// no atomic boundaries. NLB 0 is a no-op.
import { atomicRange } from '../atomic-range.js';
import { Opcode } from '../../../protocol/scsi/opcodes.js';
import { INVALID_COMMAND_OPERATION_CODE } from '../../../protocol/scsi/sense-codes.js';
import { checkRange, protectField } from '../cdb-fields.js';
import { dataOut, defineCommand } from '../command-spec.js';
import { check, good, invalidCdb, isFailure } from '../outcome.js';
import { io as backendIo } from '../sense-map.js';

interface WriteAtomicParams {
  lba: number;
  blocks: number;
  fua: boolean;
}

export const writeAtomic16 = defineCommand<WriteAtomicParams>({
  opcode: Opcode.WRITE_ATOMIC_16,
  name: 'WRITE ATOMIC(16)',
  cdbLength: 16,
  // WRPROTECT, DPO, FUA; LBA; ATOMIC BOUNDARY (only 0); TRANSFER LENGTH; GROUP NUMBER.
  usage: [Opcode.WRITE_ATOMIC_16, 0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0xff, 0xff, 0x1f, 0x00],
  pr: 'write',
  access: 'write',
  exclusive: true,
  parse(cdb, lu) {
    const atomic = lu.atomic;
    if (atomic === null) return check(INVALID_COMMAND_OPERATION_CODE);
    if (protectField(cdb) !== 0) return invalidCdb(1, 7);
    // MAXIMUM ATOMIC BOUNDARY SIZE is 0: a non-zero ATOMIC BOUNDARY is not supported (SBC-4 5.48.2).
    if (cdb.readUInt16BE(10) !== 0) return invalidCdb(10);
    const blocks = cdb.readUInt16BE(12);
    // The range first: a write past the end is LBA OUT OF RANGE whatever its length (libiscsi WriteAtomic16.BeyondEol).
    const start = checkRange(lu, cdb.readBigUInt64BE(2), blocks);
    if (isFailure(start)) return start;
    if (blocks > atomic.maxBlocks || blocks % atomic.granularity !== 0) return invalidCdb(12);
    if (start % atomic.alignment !== 0) return invalidCdb(2);
    return dataOut(blocks * lu.blockSize, { lba: start, blocks, fua: (cdb[1] & 0x08) !== 0 });
  },
  execute(p, io) {
    const lu = io.lu;
    return atomicRange(io, p, async (len, off) => {
      await backendIo('write', lu.backend.write(io.data.subarray(0, len), off, { fua: p.fua || !lu.modes.wce }));
      return good();
    });
  },
});
