// REPORT LUNS (SPC-5 6.33): the LUNs this nexus may see, which the caller
// supplies; answered for any LUN and never blocked by a unit attention.
import { encodeLun, LUN_SIZE, MAX_LUN } from '../../../protocol/scsi/lun.js';
import { Opcode } from '../../../protocol/scsi/opcodes.js';
import { dataIn, ANSWERED_IN_ANY_STATE, defineCommand } from '../command-spec.js';
import { invalidCdb, respond } from '../outcome.js';

interface ReportLunsParams {
  select: number;
  allocationLength: number;
}

export const reportLuns = defineCommand<ReportLunsParams>({
  opcode: Opcode.REPORT_LUNS,
  name: 'REPORT LUNS',
  cdbLength: 12,
  usage: [Opcode.REPORT_LUNS, 0, 0xff, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0x00],
  ...ANSWERED_IN_ANY_STATE,
  parse(cdb) {
    const select = cdb[2];
    // 00h all, 01h well known only, 02h all; 10h/11h ask for administrative
    // LUs, of which there are none (SPC-5 table 290).
    if (![0x00, 0x01, 0x02, 0x10, 0x11].includes(select)) return invalidCdb(2);
    const allocationLength = cdb.readUInt32BE(6);
    if (allocationLength < 4) return invalidCdb(6);
    return dataIn(allocationLength, { select, allocationLength });
  },
  execute(p, io) {
    const luns =
      p.select === 0x00 || p.select === 0x02
        ? [...new Set(io.visibleLuns)].filter((l) => Number.isInteger(l) && l >= 0 && l <= MAX_LUN).sort((a, b) => a - b)
        : [];
    const b = Buffer.alloc(8 + LUN_SIZE * luns.length);
    b.writeUInt32BE(LUN_SIZE * luns.length, 0);
    luns.forEach((l, i) => encodeLun(l, b, 8 + LUN_SIZE * i));
    return respond(io.data, b, p.allocationLength);
  },
});
