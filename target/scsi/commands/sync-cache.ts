// SYNCHRONIZE CACHE(10)/(16) (SBC-4 5.26, 5.27) and PRE-FETCH(10)/(16)
// (SBC-4 5.10, 5.11). A NUMBER OF LOGICAL BLOCKS of zero means "to the end".
// The backend can only flush everything, which covers any range. PRE-FETCH
// checks its range and returns GOOD: SBC-4 allows GOOD when the blocks were
// not cached, and the page cache does the rest.
import { Opcode } from '../../../protocol/scsi/opcodes.js';
import { checkRange } from '../cdb-fields.js';
import { defineCommand, noData, type CommandEntry } from '../command-spec.js';
import { good, isFailure } from '../outcome.js';
import { io as backendIo } from '../sense-map.js';

function ranged(op: number, name: string, sixteen: boolean, flush: boolean): CommandEntry {
  const usage = sixteen
    ? [op, 0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0x00]
    : [op, 0x02, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, 0x00];
  return defineCommand<null>({
    opcode: op,
    name,
    cdbLength: sixteen ? 16 : 10,
    usage,
    pr: flush ? 'write' : 'read',
    // A flush makes data already written durable; it changes nothing another
    // initiator can read, so a read-only initiator may ask for one.
    access: 'read',
    parse(cdb, lu) {
      const lba = sixteen ? cdb.readBigUInt64BE(2) : cdb.readUInt32BE(2);
      const blocks = sixteen ? cdb.readUInt32BE(10) : cdb.readUInt16BE(7);
      const start = checkRange(lu, lba, blocks);
      if (isFailure(start)) return start;
      return noData(null);
    },
    async execute(_p, io) {
      if (flush) await backendIo('flush', io.lu.backend.flush());
      return good();
    },
  });
}

export const synchronizeCache10 = ranged(Opcode.SYNCHRONIZE_CACHE_10, 'SYNCHRONIZE CACHE(10)', false, true);
export const synchronizeCache16 = ranged(Opcode.SYNCHRONIZE_CACHE_16, 'SYNCHRONIZE CACHE(16)', true, true);
export const prefetch10 = ranged(Opcode.PRE_FETCH_10, 'PRE-FETCH(10)', false, false);
export const prefetch16 = ranged(Opcode.PRE_FETCH_16, 'PRE-FETCH(16)', true, false);
