// UNMAP (SBC-4 5.32). The whole parameter list is validated before the first
// discard, so an error leaves the medium untouched. Limits come from VPD B0h,
// and the checks follow Linux LIO's sbc_execute_unmap.
import { Opcode } from '../../../protocol/scsi/opcodes.js';
import {
  INVALID_COMMAND_OPERATION_CODE,
  LBA_OUT_OF_RANGE,
  PARAMETER_LIST_LENGTH_ERROR,
} from '../../../protocol/scsi/sense-codes.js';
import { dataOut, defineCommand } from '../command-spec.js';
import { check, good, invalidCdb, invalidParameter } from '../outcome.js';
import { io as backendIo } from '../sense-map.js';

interface UnmapParams {
  length: number;
}

interface Range {
  lba: number;
  blocks: number;
}

export const unmap = defineCommand<UnmapParams>({
  opcode: Opcode.UNMAP,
  name: 'UNMAP',
  cdbLength: 10,
  usage: [Opcode.UNMAP, 0x01, 0, 0, 0, 0, 0x1f, 0xff, 0xff, 0x00],
  pr: 'write',
  access: 'write',
  parse(cdb, lu) {
    // LBPU is clear on a fully provisioned LU, so UNMAP is not supported there (SBC-4 6.6.7).
    if (!lu.thin) return check(INVALID_COMMAND_OPERATION_CODE);
    if (cdb[1] & 0x01) return invalidCdb(1, 0);
    const length = cdb.readUInt16BE(7);
    // A list shorter than its 8-byte header is a length error; zero means no list.
    if (length > 0 && length < 8) return check(PARAMETER_LIST_LENGTH_ERROR);
    return dataOut(length, { length });
  },
  async execute(p, io) {
    if (p.length === 0) return good();
    const lu = io.lu;
    const list = io.data.subarray(0, p.length);
    // The descriptor length is trusted only as far as the list goes; a
    // trailing partial descriptor is ignored (SBC-4 5.32.2).
    const described = list.readUInt16BE(2);
    const count = Math.floor(Math.min(described, list.length - 8) / 16);
    if (count > lu.limits.maxUnmapDescriptors) return invalidParameter(2);
    const cap = lu.blocks;
    const ranges: Range[] = [];
    for (let i = 0; i < count; i++) {
      const at = 8 + 16 * i;
      const lba = list.readBigUInt64BE(at);
      const blocks = list.readUInt32BE(at + 8);
      if (blocks > lu.limits.maxUnmapLbaCount) return invalidParameter(at + 8);
      if (lba + BigInt(blocks) > BigInt(cap) || lba > BigInt(cap)) return check(LBA_OUT_OF_RANGE);
      if (blocks > 0) ranges.push({ lba: Number(lba), blocks });
    }
    for (const r of ranges) {
      await lu.rangeLock.hold(io.nexus, r.lba, r.lba + r.blocks, false, () => backendIo('discard', lu.backend.discard(r.lba * lu.blockSize, r.blocks * lu.blockSize)));
    }
    return good();
  },
});
