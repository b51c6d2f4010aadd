// RESERVE(6) and RELEASE(6) (SPC-2 7.21, 7.17): the whole-LU reservation
// older initiators and libiscsi's Reserve6 suite use. Third-party and extent
// reservations are not supported.
import { Opcode } from '../../../protocol/scsi/opcodes.js';
import { defineCommand, noData } from '../command-spec.js';
import { invalidCdb } from '../outcome.js';

export const reserve6 = defineCommand<null>({
  opcode: Opcode.RESERVE_6,
  name: 'RESERVE(6)',
  cdbLength: 6,
  usage: [Opcode.RESERVE_6, 0, 0, 0, 0, 0x00],
  pr: 'exempt',
  access: 'shared-state',
  exclusive: true,
  parse(cdb) {
    if (cdb[1] & 0x10) return invalidCdb(1, 4);
    if (cdb[1] & 0x01) return invalidCdb(1, 0);
    return noData(null);
  },
  execute: (_p, io) => io.lu.reservations.reserveLegacy(io.nexusKey),
});

export const release6 = defineCommand<null>({
  opcode: Opcode.RELEASE_6,
  name: 'RELEASE(6)',
  cdbLength: 6,
  usage: [Opcode.RELEASE_6, 0, 0, 0, 0, 0x00],
  pr: 'exempt',
  access: 'shared-state',
  exclusive: true,
  legacyExempt: true,
  parse(cdb) {
    if (cdb[1] & 0x10) return invalidCdb(1, 4);
    if (cdb[1] & 0x01) return invalidCdb(1, 0);
    return noData(null);
  },
  execute: (_p, io) => io.lu.reservations.releaseLegacy(io.nexusKey),
});
