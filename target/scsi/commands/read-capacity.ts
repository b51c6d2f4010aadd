// READ CAPACITY(10) (SBC-4 5.20) and (16) (SBC-4 5.21).
import { Opcode, ServiceActionIn16 } from '../../../protocol/scsi/opcodes.js';
import { dataIn, defineCommand } from '../command-spec.js';
import { respond } from '../outcome.js';

export const readCapacity10 = defineCommand<null>({
  opcode: Opcode.READ_CAPACITY_10,
  name: 'READ CAPACITY(10)',
  cdbLength: 10,
  usage: [Opcode.READ_CAPACITY_10, 0, 0, 0, 0, 0, 0, 0, 0, 0x00],
  pr: 'exempt',
  access: 'read',
  // LBA and PMI are obsolete in SBC-4 and ignored.
  parse: () => dataIn(8, null),
  execute(_p, io) {
    const b = Buffer.alloc(8);
    // FFFFFFFFh sends the initiator to READ CAPACITY(16) (SBC-4 5.20.2).
    b.writeUInt32BE(Math.min(Math.max(io.lu.blocks - 1, 0), 0xffffffff), 0);
    b.writeUInt32BE(io.lu.blockSize, 4);
    return respond(io.data, b, 8);
  },
});

export const readCapacity16 = defineCommand<number>({
  opcode: Opcode.SERVICE_ACTION_IN_16,
  serviceAction: ServiceActionIn16.READ_CAPACITY_16,
  name: 'READ CAPACITY(16)',
  cdbLength: 16,
  usage: [Opcode.SERVICE_ACTION_IN_16, ServiceActionIn16.READ_CAPACITY_16, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0x00],
  pr: 'exempt',
  access: 'read',
  parse: (cdb) => dataIn(cdb.readUInt32BE(10), cdb.readUInt32BE(10)),
  execute(allocationLength, io) {
    const b = Buffer.alloc(32);
    b.writeBigUInt64BE(BigInt(Math.max(io.lu.blocks - 1, 0)), 0);
    b.writeUInt32BE(io.lu.blockSize, 8);
    // LBPME and LBPRZ for a thin LU (SBC-4 5.21.2, protocol-facts B2 notes).
    if (io.lu.thin) b[14] = 0x80 | 0x40;
    // LOGICAL BLOCKS PER PHYSICAL BLOCK EXPONENT (logical-unit.ts physicalBlockSize; the unmap granularity, vpd.ts).
    b[13] = Math.log2(io.lu.physicalBlockSize / io.lu.blockSize);
    return respond(io.data, b, allocationLength);
  },
});
