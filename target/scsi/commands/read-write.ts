// READ and WRITE (6), (10), (12), (16) (SBC-4 5.12-5.19, 5.37-5.44). The
// backend reads into and writes from the transport's registered buffer
// itself, so the data is never copied. FUA, or a disabled write cache (WCE 0),
// makes the backend write durable before GOOD; DPO is a hint and ignored.
import { Opcode } from '../../../protocol/scsi/opcodes.js';
import { blockLengthField, dataIn, dataOut, defineCommand, type CommandEntry } from '../command-spec.js';
import { checkRange, protectField } from '../cdb-fields.js';
import { good, invalidCdb, isFailure } from '../outcome.js';
import { io as backendIo } from '../sense-map.js';

interface RwParams {
  lba: number;
  blocks: number;
  fua: boolean;
}

type Size = 6 | 10 | 12 | 16;

interface Layout {
  cdbLength: number;
  /** Where TRANSFER LENGTH starts, for the sense field pointer. */
  lengthAt: number;
  usage: (op: number) => number[];
}

const LAYOUTS: Record<Size, Layout> = {
  6: { cdbLength: 6, lengthAt: 4, usage: (op) => [op, 0x1f, 0xff, 0xff, 0xff, 0x00] },
  10: { cdbLength: 10, lengthAt: 7, usage: (op) => [op, 0xf8, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, 0x00] },
  12: { cdbLength: 12, lengthAt: 6, usage: (op) => [op, 0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0x00] },
  16: {
    cdbLength: 16,
    lengthAt: 10,
    usage: (op) => [op, 0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0x00],
  },
};

/** LBA and TRANSFER LENGTH as each CDB size lays them out. */
export function lbaAndLength(cdb: Buffer, size: Size): { lba: number | bigint; blocks: number } {
  switch (size) {
    case 6:
      // A TRANSFER LENGTH of zero means 256 blocks (SBC-4 5.14).
      return { lba: ((cdb[1] & 0x1f) << 16) | cdb.readUInt16BE(2), blocks: cdb[4] === 0 ? 256 : cdb[4] };
    case 10:
      return { lba: cdb.readUInt32BE(2), blocks: cdb.readUInt16BE(7) };
    case 12:
      return { lba: cdb.readUInt32BE(2), blocks: cdb.readUInt32BE(6) };
    case 16:
      return { lba: cdb.readBigUInt64BE(2), blocks: cdb.readUInt32BE(10) };
  }
}

function rw(op: number, name: string, write: boolean, size: Size): CommandEntry {
  const layout = LAYOUTS[size];
  return defineCommand<RwParams>({
    opcode: op,
    name,
    cdbLength: layout.cdbLength,
    usage: layout.usage(op),
    pr: write ? 'write' : 'read',
    access: write ? 'write' : 'read',
    ...(write ? { transferLengthField: blockLengthField(layout.cdbLength) } : {}),
    parse(cdb, lu) {
      // RDPROTECT/WRPROTECT need protection information, which rblk does not keep.
      if (size !== 6 && protectField(cdb) !== 0) return invalidCdb(1, 7);
      const { lba, blocks } = lbaAndLength(cdb, size);
      if (blocks > lu.limits.maxTransferBlocks) return invalidCdb(layout.lengthAt);
      const start = checkRange(lu, lba, blocks);
      if (isFailure(start)) return start;
      const params = { lba: start, blocks, fua: size !== 6 && (cdb[1] & 0x08) !== 0 };
      const bytes = blocks * lu.blockSize;
      return write ? dataOut(bytes, params) : dataIn(bytes, params);
    },
    async execute(p, io) {
      if (p.blocks === 0) return good();
      const lu = io.lu;
      // Capacity may have shrunk since parse.
      const start = checkRange(lu, p.lba, p.blocks);
      if (isFailure(start)) return start;
      const len = p.blocks * lu.blockSize;
      const buf = io.data.subarray(0, len);
      return lu.rangeLock.hold(io.nexus, p.lba, p.lba + p.blocks, false, async () => {
        if (write) {
          await backendIo('write', lu.backend.write(buf, p.lba * lu.blockSize, { fua: p.fua || !lu.modes.wce }));
          return good();
        }
        await backendIo('read', lu.backend.read(buf, p.lba * lu.blockSize));
        return good(len);
      });
    },
  });
}

export const read6 = rw(Opcode.READ_6, 'READ(6)', false, 6);
export const read10 = rw(Opcode.READ_10, 'READ(10)', false, 10);
export const read12 = rw(Opcode.READ_12, 'READ(12)', false, 12);
export const read16 = rw(Opcode.READ_16, 'READ(16)', false, 16);
export const write6 = rw(Opcode.WRITE_6, 'WRITE(6)', true, 6);
export const write10 = rw(Opcode.WRITE_10, 'WRITE(10)', true, 10);
export const write12 = rw(Opcode.WRITE_12, 'WRITE(12)', true, 12);
export const write16 = rw(Opcode.WRITE_16, 'WRITE(16)', true, 16);
