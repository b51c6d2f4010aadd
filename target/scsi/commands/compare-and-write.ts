// COMPARE AND WRITE (SBC-4 5.3). The range is locked exclusively across the
// read, the compare and the write, so no other command from any session sees
// or changes the blocks in between. On a mismatch nothing is written and the
// sense is MISCOMPARE 0E 1D/00 with INFORMATION = offset of the first
// differing byte. NLB 0 is a no-op (SBC-4 5.3.2). A backend with its own
// compareAndWrite (RBD: librbd's, atomic on the OSD) does the compare and the
// write itself, so that it is atomic for other gateways of the same image too;
// the range lock still orders it against this process's other commands.
import { atomicRange } from '../atomic-range.js';
import { Opcode } from '../../../protocol/scsi/opcodes.js';
import { MISCOMPARE_DURING_VERIFY } from '../../../protocol/scsi/sense-codes.js';
import { checkRange, protectField } from '../cdb-fields.js';
import { dataOut, defineCommand } from '../command-spec.js';
import { check, good, invalidCdb, isFailure, type Outcome } from '../outcome.js';
import { withScratch } from '../scratch.js';
import { io as backendIo } from '../sense-map.js';
import { isMiscompare } from '../../backend/backend.js';

interface CawParams {
  lba: number;
  blocks: number;
  fua: boolean;
}

/** Offset of the first byte where a and b differ, or -1 (same length assumed). */
export function firstDifference(a: Buffer, b: Buffer): number {
  if (a.equals(b)) return -1;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return i;
  return -1;
}

export const compareAndWrite = defineCommand<CawParams>({
  opcode: Opcode.COMPARE_AND_WRITE,
  name: 'COMPARE AND WRITE',
  cdbLength: 16,
  usage: [Opcode.COMPARE_AND_WRITE, 0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0xff, 0x1f, 0x00],
  pr: 'write',
  access: 'write',
  exclusive: true,
  exactDataOut: true,
  parse(cdb, lu) {
    if (protectField(cdb) !== 0) return invalidCdb(1, 7);
    const blocks = cdb[13];
    if (blocks > lu.limits.maxCompareAndWriteBlocks) return invalidCdb(13);
    const start = checkRange(lu, cdb.readBigUInt64BE(2), blocks);
    if (isFailure(start)) return start;
    // Data-out is the verify instance then the write instance.
    return dataOut(2 * blocks * lu.blockSize, { lba: start, blocks, fua: (cdb[1] & 0x08) !== 0 });
  },
  execute(p, io) {
    const lu = io.lu;
    return atomicRange(io, p, async (len, off) => {
      const verify = io.data.subarray(0, len);
      const write = io.data.subarray(len, 2 * len);
      const atomic = lu.backend.compareAndWrite?.bind(lu.backend);
      if (atomic !== undefined) {
        const miscompare = await backendIo(
          'write',
          atomic(verify, write, off, { fua: p.fua || !lu.modes.wce }).then(
            () => -1,
            (e: unknown) => {
              if (isMiscompare(e)) return e.mismatchOffset;
              throw e;
            },
          ),
        );
        return miscompare >= 0 ? check(MISCOMPARE_DURING_VERIFY, { information: miscompare }) : good();
      }
      return await withScratch(len, async (current): Promise<Outcome> => {
        await backendIo('read', lu.backend.read(current, off));
        const at = firstDifference(verify, current);
        if (at >= 0) return check(MISCOMPARE_DURING_VERIFY, { information: at });
        await backendIo('write', lu.backend.write(write, off, { fua: p.fua || !lu.modes.wce }));
        return good();
      });
    });
  },
});
