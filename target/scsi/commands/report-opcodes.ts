// REPORT SUPPORTED OPERATION CODES (SPC-5 6.35), generated from the command
// table so that the report and the dispatcher cannot disagree.
import { CommandSupport } from '../../../protocol/scsi/supported-opcodes.js';
import { MaintenanceIn, Opcode, ReportingOptions } from '../../../protocol/scsi/opcodes.js';
import { dataIn, defineCommand, type CommandEntry } from '../command-spec.js';
import { invalidCdb, respond } from '../outcome.js';

interface RsocParams {
  options: number;
  rctd: boolean;
  opcode: number;
  serviceAction: number;
  allocationLength: number;
}

/** Command timeouts descriptor (SPC-5 6.35.4): no nominal time, 30 s recommended. */
function timeouts(): Buffer {
  const t = Buffer.alloc(12);
  t.writeUInt16BE(0x0a, 0);
  t.writeUInt32BE(30, 8);
  return t;
}

function allCommands(entries: readonly CommandEntry[], rctd: boolean): Buffer {
  const sorted = [...entries].sort((a, b) => a.opcode - b.opcode || (a.serviceAction ?? 0) - (b.serviceAction ?? 0));
  const parts = sorted.map((e) => {
    const d = Buffer.alloc(8);
    d[0] = e.opcode;
    d.writeUInt16BE(e.serviceAction ?? 0, 2);
    d[5] = (rctd ? 0x02 : 0) | (e.serviceAction !== undefined ? 0x01 : 0);
    d.writeUInt16BE(e.cdbLength, 6);
    return rctd ? Buffer.concat([d, timeouts()]) : d;
  });
  const body = Buffer.concat(parts);
  const head = Buffer.alloc(4);
  head.writeUInt32BE(body.length, 0);
  return Buffer.concat([head, body]);
}

function oneCommand(entry: CommandEntry | undefined, rctd: boolean): Buffer {
  if (!entry) return Buffer.from([0, CommandSupport.NOT_SUPPORTED, 0, 0]);
  const head = Buffer.alloc(4);
  head[1] = (rctd ? 0x80 : 0) | CommandSupport.SUPPORTED;
  head.writeUInt16BE(entry.cdbLength, 2);
  const parts: Buffer[] = [head, Buffer.from(entry.usage)];
  if (rctd) parts.push(timeouts());
  return Buffer.concat(parts);
}

/** The table is passed lazily: this command is itself one of its entries. */
export function reportSupportedOperationCodes(table: () => readonly CommandEntry[]): CommandEntry {
  return defineCommand<RsocParams>({
    opcode: Opcode.MAINTENANCE_IN,
    serviceAction: MaintenanceIn.REPORT_SUPPORTED_OPERATION_CODES,
    name: 'REPORT SUPPORTED OPERATION CODES',
    cdbLength: 12,
    usage: [Opcode.MAINTENANCE_IN, MaintenanceIn.REPORT_SUPPORTED_OPERATION_CODES, 0x87, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0x00],
    pr: 'exempt',
    access: 'read',
    alua: 'unavailable',
    legacyExempt: true,
    parse(cdb) {
      const options = cdb[2] & 0x07;
      if (options > ReportingOptions.ONE_EITHER) return invalidCdb(2, 2);
      const allocationLength = cdb.readUInt32BE(6);
      return dataIn(allocationLength, {
        options,
        rctd: (cdb[2] & 0x80) !== 0,
        opcode: cdb[3],
        serviceAction: cdb.readUInt16BE(4),
        allocationLength,
      });
    },
    execute(p, io) {
      const entries = table();
      if (p.options === ReportingOptions.ALL) return respond(io.data, allCommands(entries, p.rctd), p.allocationLength);
      const forOpcode = entries.filter((e) => e.opcode === p.opcode);
      const hasServiceActions = forOpcode.some((e) => e.serviceAction !== undefined);
      // Options 001b and 010b must match whether the opcode has service actions (SPC-5 table 279).
      if (p.options === ReportingOptions.ONE_OPCODE && hasServiceActions) return invalidCdb(2, 2);
      if (p.options === ReportingOptions.ONE_SERVICE_ACTION && forOpcode.length > 0 && !hasServiceActions) {
        return invalidCdb(2, 2);
      }
      const entry = hasServiceActions ? forOpcode.find((e) => e.serviceAction === p.serviceAction) : forOpcode[0];
      return respond(io.data, oneCommand(entry, p.rctd), p.allocationLength);
    },
  });
}
