// PERSISTENT RESERVE IN (SPC-5 6.16): READ KEYS, READ RESERVATION, REPORT
// CAPABILITIES and READ FULL STATUS, one table entry per service action.
import { encodeNameTransportId, PR_TYPE_MASK } from '../../../protocol/scsi/persistent-reservation.js';
import { Opcode, PrInAction, PrType } from '../../../protocol/scsi/opcodes.js';
import { dataIn, defineCommand, type CommandEntry, type CommandIo } from '../command-spec.js';
import { LOGICAL_UNIT_COMMUNICATION_FAILURE } from '../../../protocol/scsi/sense-codes.js';
import { check, respond, type Outcome } from '../outcome.js';

/** rblk reports one target port per target; its relative identifier is 1. */
const RELATIVE_TARGET_PORT = 1;

function header(generation: number, length: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeUInt32BE(generation, 0);
  b.writeUInt32BE(length, 4);
  return b;
}

function readKeys(io: CommandIo): Buffer {
  const pr = io.lu.reservations;
  const keys = pr.registrants.map((r) => {
    const k = Buffer.alloc(8);
    k.writeBigUInt64BE(r.key);
    return k;
  });
  return Buffer.concat([header(pr.generation, 8 * keys.length), ...keys]);
}

function readReservation(io: CommandIo): Buffer {
  const pr = io.lu.reservations;
  const r = pr.reservation;
  if (!r) return header(pr.generation, 0);
  const d = Buffer.alloc(16);
  // For the all-registrants types the key reads as zero (SPC-5 6.16.3).
  const allRegistrants = r.type === PrType.WRITE_EXCLUSIVE_ALL_REGISTRANTS || r.type === PrType.EXCLUSIVE_ACCESS_ALL_REGISTRANTS;
  const holderKey = pr.registrants.find((x) => x.nexusKey === r.holder)?.key ?? 0n;
  d.writeBigUInt64BE(allRegistrants ? 0n : holderKey, 0);
  d[13] = (r.scope << 4) | r.type;
  return Buffer.concat([header(pr.generation, 16), d]);
}

function reportCapabilities(): Buffer {
  const b = Buffer.alloc(8);
  b.writeUInt16BE(8, 0);
  // CRH, SIP_C, ATP_C and PTPL_C are clear: no SPEC_I_PT, ALL_TG_PT or APTPL.
  b[3] = 0x80; // TMV: the type mask is valid
  for (const m of Object.values(PR_TYPE_MASK)) b[m.byte] |= m.bit;
  return b;
}

function readFullStatus(io: CommandIo): Buffer {
  const pr = io.lu.reservations;
  const r = pr.reservation;
  const entries = pr.registrants.map((reg) => {
    const tid = encodeNameTransportId(reg.initiator);
    const d = Buffer.alloc(24 + tid.length);
    d.writeBigUInt64BE(reg.key, 0);
    if (r && pr.isHolder(reg.nexusKey)) {
      d[12] = 0x01; // R_HOLDER
      d[13] = (r.scope << 4) | r.type;
    }
    d.writeUInt16BE(RELATIVE_TARGET_PORT, 18);
    d.writeUInt32BE(tid.length, 20);
    tid.copy(d, 24);
    return d;
  });
  const body = Buffer.concat(entries);
  return Buffer.concat([header(pr.generation, body.length), body]);
}

const BUILDERS: Record<number, { name: string; build: (io: CommandIo) => Buffer }> = {
  [PrInAction.READ_KEYS]: { name: 'READ KEYS', build: readKeys },
  [PrInAction.READ_RESERVATION]: { name: 'READ RESERVATION', build: readReservation },
  [PrInAction.REPORT_CAPABILITIES]: { name: 'REPORT CAPABILITIES', build: reportCapabilities },
  [PrInAction.READ_FULL_STATUS]: { name: 'READ FULL STATUS', build: readFullStatus },
};

function prIn(sa: number): CommandEntry {
  const { name, build } = BUILDERS[sa];
  return defineCommand<number>({
    opcode: Opcode.PERSISTENT_RESERVE_IN,
    serviceAction: sa,
    name: `PERSISTENT RESERVE IN / ${name}`,
    cdbLength: 10,
    usage: [Opcode.PERSISTENT_RESERVE_IN, sa, 0, 0, 0, 0, 0, 0xff, 0xff, 0x00],
    pr: 'exempt',
    access: 'read',
    parse: (cdb) => dataIn(cdb.readUInt16BE(7), cdb.readUInt16BE(7)),
    // A shared store that cannot vouch for its copy reports nothing it might have missed (reservation-store.ts).
    execute: (allocationLength, io): Outcome =>
      io.lu.reservations.current ? respond(io.data, build(io), allocationLength) : check(LOGICAL_UNIT_COMMUNICATION_FAILURE),
  });
}

export const persistentReserveIn: readonly CommandEntry[] = Object.keys(BUILDERS).map((sa) => prIn(Number(sa)));
