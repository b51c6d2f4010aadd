// MODE SENSE(6) and (10) (SPC-5 6.13, 6.14) over the pages in mode-pages.ts,
// with the direct-access header and block descriptors of SBC-4 6.4.
import { DeviceSpecific } from '../../../protocol/scsi/mode.js';
import { ModePage, Opcode, PageControl } from '../../../protocol/scsi/opcodes.js';
import { SAVING_PARAMETERS_NOT_SUPPORTED } from '../../../protocol/scsi/sense-codes.js';
import { dataIn, defineCommand, type CommandIo } from '../command-spec.js';
import type { LogicalUnit } from '../logical-unit.js';
import { buildModePages, type PageKind } from './mode-pages.js';
import { check, invalidCdb, isFailure, respond, type Failure } from '../outcome.js';

interface ModeSenseParams {
  dbd: boolean;
  llbaa: boolean;
  page: number;
  kind: PageKind;
  allocationLength: number;
}

const KINDS: Record<number, PageKind> = {
  [PageControl.CURRENT]: 'current',
  [PageControl.CHANGEABLE]: 'changeable',
  [PageControl.DEFAULT]: 'default',
};

function parsePageFields(cdb: Buffer): Omit<ModeSenseParams, 'dbd' | 'llbaa' | 'allocationLength'> | Failure {
  const pc = cdb[2] >> 6;
  const page = cdb[2] & 0x3f;
  // No page is saveable (PS = 0), so saved values cannot be reported (SPC-5 6.13).
  if (pc === PageControl.SAVED) return check(SAVING_PARAMETERS_NOT_SUPPORTED, { fieldPointer: { inCdb: true, byte: 2, bit: 7 } });
  // Subpages: only "all pages and subpages" (3Fh/FFh) is recognised.
  if (cdb[3] !== 0 && !(page === ModePage.ALL && cdb[3] === 0xff)) return invalidCdb(3);
  if (page !== ModePage.ALL && page !== ModePage.CACHING && page !== ModePage.CONTROL) return invalidCdb(2, 5);
  return { page, kind: KINDS[pc] };
}

function deviceSpecific(io: CommandIo): number {
  // WP tells the initiator the medium is write protected for it (SBC-4 6.4.1),
  // which is how Linux sd marks the disk read-only; SWP counts (SPC-5 7.5.8).
  const wp = io.lu.readOnly || io.access === 'ro' || io.lu.modes.swp;
  return (wp ? DeviceSpecific.WP : 0) | DeviceSpecific.DPOFUA;
}

/** Block descriptor (SBC-4 6.4.2): short with a 4-byte block count, or long (LONGLBA). */
function blockDescriptor(lu: LogicalUnit, long: boolean): Buffer {
  if (long) {
    const d = Buffer.alloc(16);
    d.writeBigUInt64BE(BigInt(lu.blocks), 0);
    d.writeUInt32BE(lu.blockSize, 12);
    return d;
  }
  const d = Buffer.alloc(8);
  d.writeUInt32BE(Math.min(lu.blocks, 0xffffffff), 0);
  d.writeUIntBE(lu.blockSize, 5, 3);
  return d;
}

export const modeSense6 = defineCommand<ModeSenseParams>({
  opcode: Opcode.MODE_SENSE_6,
  name: 'MODE SENSE(6)',
  cdbLength: 6,
  usage: [Opcode.MODE_SENSE_6, 0x08, 0xff, 0xff, 0xff, 0x00],
  pr: 'read',
  access: 'read',
  alua: 'standby',
  parse(cdb) {
    const fields = parsePageFields(cdb);
    if (isFailure(fields)) return fields;
    return dataIn(cdb[4], { ...fields, dbd: (cdb[1] & 0x08) !== 0, llbaa: false, allocationLength: cdb[4] });
  },
  execute(p, io) {
    const pages = buildModePages(p.page, p.kind, io.lu.modes) ?? Buffer.alloc(0);
    const bd = p.dbd ? Buffer.alloc(0) : blockDescriptor(io.lu, false);
    const head = Buffer.alloc(4);
    head[0] = 3 + bd.length + pages.length;
    head[2] = deviceSpecific(io);
    head[3] = bd.length;
    return respond(io.data, Buffer.concat([head, bd, pages]), p.allocationLength);
  },
});

export const modeSense10 = defineCommand<ModeSenseParams>({
  opcode: Opcode.MODE_SENSE_10,
  name: 'MODE SENSE(10)',
  cdbLength: 10,
  usage: [Opcode.MODE_SENSE_10, 0x18, 0xff, 0xff, 0, 0, 0, 0xff, 0xff, 0x00],
  pr: 'read',
  access: 'read',
  alua: 'standby',
  parse(cdb) {
    const fields = parsePageFields(cdb);
    if (isFailure(fields)) return fields;
    const allocationLength = cdb.readUInt16BE(7);
    return dataIn(allocationLength, {
      ...fields,
      dbd: (cdb[1] & 0x08) !== 0,
      llbaa: (cdb[1] & 0x10) !== 0,
      allocationLength,
    });
  },
  execute(p, io) {
    const pages = buildModePages(p.page, p.kind, io.lu.modes) ?? Buffer.alloc(0);
    // The long descriptor only when asked for and needed (SBC-4 6.4.2).
    const long = p.llbaa && io.lu.blocks > 0xffffffff;
    const bd = p.dbd ? Buffer.alloc(0) : blockDescriptor(io.lu, long);
    const head = Buffer.alloc(8);
    head.writeUInt16BE(6 + bd.length + pages.length, 0);
    head[3] = deviceSpecific(io);
    head[4] = long ? 0x01 : 0;
    head.writeUInt16BE(bd.length, 6);
    return respond(io.data, Buffer.concat([head, bd, pages]), p.allocationLength);
  },
});
