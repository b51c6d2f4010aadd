// READ DEFECT DATA(10) and (12) (SBC-4 5.22, 5.23). A file or a volume has no
// grown or primary defect list in the sense of a disk's media: the answer is
// an empty list, in the format asked for, with PLISTV/GLISTV echoing the lists
// requested (both valid, both empty). That is the truth and what sg3_utils'
// sg_defect and libiscsi's ReadDefectData tests read.
import { Opcode } from '../../../protocol/scsi/opcodes.js';
import { dataIn, defineCommand } from '../command-spec.js';
import { respond } from '../outcome.js';

interface DefectParams {
  /** REQ_PLIST (bit 4), REQ_GLIST (bit 3) and DEFECT LIST FORMAT (2:0), as asked. */
  readonly flags: number;
  readonly allocationLength: number;
}

export const readDefectData10 = defineCommand<DefectParams>({
  opcode: Opcode.READ_DEFECT_DATA_10,
  name: 'READ DEFECT DATA(10)',
  cdbLength: 10,
  usage: [Opcode.READ_DEFECT_DATA_10, 0, 0x1f, 0, 0, 0, 0, 0xff, 0xff, 0x00],
  pr: 'read',
  access: 'read',
  parse(cdb) {
    const allocationLength = cdb.readUInt16BE(7);
    return dataIn(allocationLength, { flags: cdb[2] & 0x1f, allocationLength });
  },
  execute(p, io) {
    // Header (SBC-4 table 69): PLISTV, GLISTV, format; DEFECT LIST LENGTH 0.
    const b = Buffer.alloc(4);
    b[1] = p.flags;
    return respond(io.data, b, p.allocationLength);
  },
});

export const readDefectData12 = defineCommand<DefectParams>({
  opcode: Opcode.READ_DEFECT_DATA_12,
  name: 'READ DEFECT DATA(12)',
  cdbLength: 12,
  usage: [Opcode.READ_DEFECT_DATA_12, 0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0x00],
  pr: 'read',
  access: 'read',
  parse(cdb) {
    const allocationLength = cdb.readUInt32BE(6);
    return dataIn(allocationLength, { flags: cdb[1] & 0x1f, allocationLength });
  },
  execute(p, io) {
    // Header (SBC-4 table 72): flags, GENERATION CODE 0 (not kept), DEFECT LIST LENGTH 0.
    const b = Buffer.alloc(8);
    b[1] = p.flags;
    return respond(io.data, b, p.allocationLength);
  },
});
