// REQUEST SENSE (SPC-5 6.39). rblk always returns sense with the failing
// command (autosense), so this reports a pending unit attention, consuming
// it, or NO SENSE; for a LUN with no logical unit it reports LOGICAL UNIT NOT
// SUPPORTED as parameter data with GOOD status.
import { Opcode } from '../../../protocol/scsi/opcodes.js';
import { LOGICAL_UNIT_NOT_SUPPORTED, NO_ADDITIONAL_SENSE } from '../../../protocol/scsi/sense-codes.js';
import { buildSense } from '../../../protocol/scsi/sense.js';
import { dataIn, ANSWERED_IN_ANY_STATE, defineCommand } from '../command-spec.js';
import { respond } from '../outcome.js';

interface RequestSenseParams {
  descriptor: boolean;
  allocationLength: number;
}

export const requestSense = defineCommand<RequestSenseParams>({
  opcode: Opcode.REQUEST_SENSE,
  name: 'REQUEST SENSE',
  cdbLength: 6,
  usage: [Opcode.REQUEST_SENSE, 0x01, 0, 0, 0xff, 0x00],
  ...ANSWERED_IN_ANY_STATE,
  parse(cdb) {
    return dataIn(cdb[4], { descriptor: (cdb[1] & 0x01) !== 0, allocationLength: cdb[4] });
  },
  execute(p, io) {
    const code = io.lu ? (io.lu.attentions.take(io.nexusKey) ?? NO_ADDITIONAL_SENSE) : LOGICAL_UNIT_NOT_SUPPORTED;
    return respond(io.data, buildSense({ code }, p.descriptor ? 'descriptor' : 'fixed'), p.allocationLength);
  },
});
