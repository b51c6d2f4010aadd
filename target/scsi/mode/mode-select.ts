// MODE SELECT(6) and (10) (SPC-5 6.11, 6.12): the header, optional block
// descriptors that must describe the medium as it is, then pages whose
// non-changeable bits must match the current values.
import { Opcode } from '../../../protocol/scsi/opcodes.js';
import { PARAMETER_LIST_LENGTH_ERROR } from '../../../protocol/scsi/sense-codes.js';
import { dataOut, defineCommand, type CommandIo } from '../command-spec.js';
import { applyModePages } from './mode-pages.js';
import { check, good, invalidCdb, invalidParameter, isFailure, type Outcome } from '../outcome.js';

interface ModeSelectParams {
  length: number;
  ten: boolean;
}

function parseCdb(cdb: Buffer, length: number, ten: boolean) {
  // SP: there are no saved pages to write (SPC-5 6.11).
  if (cdb[1] & 0x01) return invalidCdb(1, 0);
  return dataOut(length, { length, ten });
}

function execute(p: ModeSelectParams, io: CommandIo): Outcome {
  if (p.length === 0) return good();
  const list = io.data.subarray(0, p.length);
  const headerLength = p.ten ? 8 : 4;
  if (list.length < headerLength) return check(PARAMETER_LIST_LENGTH_ERROR);
  const bdl = p.ten ? list.readUInt16BE(6) : list[3];
  const long = p.ten && (list[4] & 0x01) !== 0;
  const size = long ? 16 : 8;
  if (headerLength + bdl > list.length) return check(PARAMETER_LIST_LENGTH_ERROR);
  if (bdl % size !== 0) return invalidParameter(p.ten ? 6 : 3);
  for (let at = headerLength; at < headerLength + bdl; at += size) {
    // A descriptor may leave the block count at zero ("no change") or repeat
    // the real one; the block length cannot change (SBC-4 6.4.2).
    const blocks = long ? Number(list.readBigUInt64BE(at)) : list.readUInt32BE(at);
    const blockLength = long ? list.readUInt32BE(at + 12) : list.readUIntBE(at + 5, 3);
    const shownBlocks = long ? io.lu.blocks : Math.min(io.lu.blocks, 0xffffffff);
    if (blocks !== 0 && blocks !== shownBlocks) return invalidParameter(at);
    if (blockLength !== io.lu.blockSize) return invalidParameter(at + (long ? 12 : 5));
  }
  const start = headerLength + bdl;
  const next = applyModePages(list.subarray(start), start, io.lu.modes);
  if (isFailure(next)) return next;
  io.lu.setModes(next, io.nexus);
  return good();
}

export const modeSelect6 = defineCommand<ModeSelectParams>({
  opcode: Opcode.MODE_SELECT_6,
  name: 'MODE SELECT(6)',
  cdbLength: 6,
  usage: [Opcode.MODE_SELECT_6, 0x11, 0, 0, 0xff, 0x00],
  pr: 'write',
  access: 'shared-state',
  alua: 'standby',
  exclusive: true,
  parse: (cdb) => parseCdb(cdb, cdb[4], false),
  execute,
});

export const modeSelect10 = defineCommand<ModeSelectParams>({
  opcode: Opcode.MODE_SELECT_10,
  name: 'MODE SELECT(10)',
  cdbLength: 10,
  usage: [Opcode.MODE_SELECT_10, 0x11, 0, 0, 0, 0, 0, 0xff, 0xff, 0x00],
  pr: 'write',
  access: 'shared-state',
  alua: 'standby',
  exclusive: true,
  parse: (cdb) => parseCdb(cdb, cdb.readUInt16BE(7), true),
  execute,
});
