// INQUIRY (SPC-5 6.7): standard data and VPD pages. Answered for any LUN: a
// LUN with no logical unit reports peripheral qualifier 011b (SPC-5 6.7.2).
import { writeAscii } from '../../../protocol/scsi/ascii.js';
import { DEVICE_TYPE_DISK, NO_LOGICAL_UNIT, Opcode } from '../../../protocol/scsi/opcodes.js';
import { LOGICAL_UNIT_NOT_SUPPORTED } from '../../../protocol/scsi/sense-codes.js';
import { dataIn, ANSWERED_IN_ANY_STATE, defineCommand } from '../command-spec.js';
import { DEFAULT_PRODUCT, DEFAULT_REVISION, DEFAULT_VENDOR, type LogicalUnit } from '../logical-unit.js';
import { check, invalidCdb, respond } from '../outcome.js';
import { buildVpdPage } from './vpd.js';

const STANDARD_LENGTH = 66;
/** Version descriptors (SPC-5 table 148): SAM-5, SPC-4, SBC-3, each "no version claimed". */
const VERSION_DESCRIPTORS = [0x00a0, 0x0460, 0x04c0];

export function standardInquiry(lu: LogicalUnit | undefined): Buffer {
  const b = Buffer.alloc(STANDARD_LENGTH);
  b[0] = lu ? DEVICE_TYPE_DISK : NO_LOGICAL_UNIT;
  b[2] = 0x06; // VERSION: SPC-4, the newest libiscsi accepts
  b[3] = 0x10 | 0x02; // HISUP, RESPONSE DATA FORMAT 2
  b[4] = STANDARD_LENGTH - 5;
  // TPGS 01b: implicit ALUA only, when the gateway has target port groups (port-groups.ts).
  if (lu?.portGroups !== undefined) b[5] = 0x10;
  b[7] = 0x02; // CMDQUE: tagged queueing
  writeAscii(b, 8, 8, lu?.vendor ?? DEFAULT_VENDOR);
  writeAscii(b, 16, 16, lu?.product ?? DEFAULT_PRODUCT);
  writeAscii(b, 32, 4, lu?.revision ?? DEFAULT_REVISION);
  VERSION_DESCRIPTORS.forEach((v, i) => b.writeUInt16BE(v, 58 + 2 * i));
  return b;
}

interface InquiryParams {
  evpd: boolean;
  page: number;
  allocationLength: number;
}

export const inquiry = defineCommand<InquiryParams>({
  opcode: Opcode.INQUIRY,
  name: 'INQUIRY',
  cdbLength: 6,
  usage: [Opcode.INQUIRY, 0x01, 0xff, 0xff, 0xff, 0x00],
  ...ANSWERED_IN_ANY_STATE,
  parse(cdb) {
    // CMDDT is obsolete since SPC-3 and must be zero.
    if (cdb[1] & 0x02) return invalidCdb(1, 1);
    const evpd = (cdb[1] & 0x01) !== 0;
    if (!evpd && cdb[2] !== 0) return invalidCdb(2);
    return dataIn(cdb.readUInt16BE(3), { evpd, page: cdb[2], allocationLength: cdb.readUInt16BE(3) });
  },
  execute(p, io) {
    if (!p.evpd) return respond(io.data, standardInquiry(io.lu), p.allocationLength);
    if (!io.lu) return check(LOGICAL_UNIT_NOT_SUPPORTED);
    const page = buildVpdPage(p.page, io.lu);
    if (!page) return invalidCdb(2);
    return respond(io.data, page, p.allocationLength);
  },
});
