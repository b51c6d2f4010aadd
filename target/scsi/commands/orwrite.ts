// ORWRITE(16) (SBC-4 5.11): each data-out byte is ORed into the block's
// current contents (BMOP 0, the only operation ORWRITE(16) has). The range is
// locked exclusively across the read, the OR and the write, so no other
// command sees a half-applied OR, as for COMPARE AND WRITE. ORPROTECT needs
// protection information, which rblk does not keep. NLB 0 is a no-op.
import { Opcode } from '../../../protocol/scsi/opcodes.js';
import { atomicRange } from '../atomic-range.js';
import { checkRange, protectField } from '../cdb-fields.js';
import { dataOut, defineCommand } from '../command-spec.js';
import { good, invalidCdb, isFailure } from '../outcome.js';
import { withScratch } from '../scratch.js';
import { io as backendIo } from '../sense-map.js';

interface OrWriteParams {
  lba: number;
  blocks: number;
  fua: boolean;
}

/** dst |= src, over dst's length; 32 bits at a time where both are aligned. */
export function orInto(dst: Buffer, src: Buffer): void {
  let i = 0;
  if (dst.byteOffset % 4 === 0 && src.byteOffset % 4 === 0) {
    const n = dst.length >>> 2;
    const d = new Uint32Array(dst.buffer, dst.byteOffset, n);
    const s = new Uint32Array(src.buffer, src.byteOffset, n);
    for (; i < n; i++) d[i] |= s[i];
    i = n << 2;
  }
  for (; i < dst.length; i++) dst[i] |= src[i];
}

export const orWrite16 = defineCommand<OrWriteParams>({
  opcode: Opcode.ORWRITE_16,
  name: 'ORWRITE(16)',
  cdbLength: 16,
  // ORPROTECT, DPO, FUA; LBA; TRANSFER LENGTH; GROUP NUMBER.
  usage: [Opcode.ORWRITE_16, 0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0x00],
  pr: 'write',
  access: 'write',
  // A read-modify-write: the native fast path stays off the LU while it runs (fast-path-gate.ts).
  exclusive: true,
  parse(cdb, lu) {
    if (protectField(cdb) !== 0) return invalidCdb(1, 7);
    const blocks = cdb.readUInt32BE(10);
    if (blocks > lu.limits.maxTransferBlocks) return invalidCdb(10);
    const start = checkRange(lu, cdb.readBigUInt64BE(2), blocks);
    if (isFailure(start)) return start;
    return dataOut(blocks * lu.blockSize, { lba: start, blocks, fua: (cdb[1] & 0x08) !== 0 });
  },
  execute(p, io) {
    const lu = io.lu;
    return atomicRange(io, p, (len, off) =>
      withScratch(len, async (current) => {
        await backendIo('read', lu.backend.read(current, off));
        orInto(current, io.data.subarray(0, len));
        await backendIo('write', lu.backend.write(current, off, { fua: p.fua || !lu.modes.wce }));
        return good();
      }),
    );
  },
});
