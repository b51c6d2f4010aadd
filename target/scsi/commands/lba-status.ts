// GET LBA STATUS (SBC-4 5.8): mapped and deallocated extents from the LBA on,
// as the backend reports them, rounded to whole blocks.
import { Opcode, ProvisioningStatus, ServiceActionIn16 } from '../../../protocol/scsi/opcodes.js';
import { LBA_OUT_OF_RANGE } from '../../../protocol/scsi/sense-codes.js';
import { dataIn, defineCommand } from '../command-spec.js';
import type { LogicalUnit } from '../logical-unit.js';
import { check, respond } from '../outcome.js';
import { io as backendIo } from '../sense-map.js';

interface LbaStatusParams {
  lba: bigint;
  allocationLength: number;
}

/** Enough for any initiator's use; the header tells it to ask again from the last LBA. */
const MAX_DESCRIPTORS = 64;

interface Run {
  lba: number;
  blocks: number;
  status: number;
}

async function nextRun(lu: LogicalUnit, lba: number, cap: number): Promise<Run> {
  if (!lu.thin) return { lba, blocks: cap - lba, status: ProvisioningStatus.MAPPED };
  const bs = lu.blockSize;
  const off = lba * bs;
  const ext = await backendIo('extent', lu.backend.extent(off));
  const end = Math.min(ext.offset + ext.length, cap * bs);
  // A block that is partly mapped is mapped; a hole counts only in whole blocks.
  const endBlock = ext.mapped ? Math.ceil(end / bs) : Math.floor(end / bs);
  if (end <= off || endBlock <= lba) return { lba, blocks: 1, status: ProvisioningStatus.MAPPED };
  return {
    lba,
    blocks: Math.min(endBlock, cap) - lba,
    status: ext.mapped ? ProvisioningStatus.MAPPED : ProvisioningStatus.DEALLOCATED,
  };
}

export const getLbaStatus = defineCommand<LbaStatusParams>({
  opcode: Opcode.SERVICE_ACTION_IN_16,
  serviceAction: ServiceActionIn16.GET_LBA_STATUS,
  name: 'GET LBA STATUS',
  cdbLength: 16,
  usage: [
    Opcode.SERVICE_ACTION_IN_16, ServiceActionIn16.GET_LBA_STATUS,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0x00,
  ],
  pr: 'read',
  access: 'read',
  parse(cdb, lu) {
    const lba = cdb.readBigUInt64BE(2);
    // The starting LBA must name a block (SBC-4 5.8.1).
    if (lba >= BigInt(lu.blocks)) return check(LBA_OUT_OF_RANGE);
    const allocationLength = cdb.readUInt32BE(10);
    return dataIn(allocationLength, { lba, allocationLength });
  },
  async execute(p, io) {
    const cap = io.lu.blocks;
    if (p.lba >= BigInt(cap)) return check(LBA_OUT_OF_RANGE);
    const want = Math.max(1, Math.min(MAX_DESCRIPTORS, Math.floor((p.allocationLength - 8) / 16)));
    const runs: Run[] = [];
    for (let lba = Number(p.lba); lba < cap && runs.length < want; ) {
      const r = await nextRun(io.lu, lba, cap);
      const last = runs[runs.length - 1];
      if (last && last.status === r.status && last.blocks + r.blocks <= 0xffffffff) last.blocks += r.blocks;
      else runs.push({ ...r, blocks: Math.min(r.blocks, 0xffffffff) });
      lba = r.lba + Math.min(r.blocks, 0xffffffff);
    }
    const b = Buffer.alloc(8 + 16 * runs.length);
    b.writeUInt32BE(4 + 16 * runs.length, 0);
    runs.forEach((r, i) => {
      b.writeBigUInt64BE(BigInt(r.lba), 8 + 16 * i);
      b.writeUInt32BE(r.blocks, 16 + 16 * i);
      b[20 + 16 * i] = r.status;
    });
    return respond(io.data, b, p.allocationLength);
  },
});
