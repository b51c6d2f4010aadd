// NVMe reservations (Base 2.0 §8.19; NVM Command Set 1.0 §3.2.5-§3.2.8:
// Reservation Register, Report, Acquire, Release) on the volume's persistent
// reservation state, the one SCSI PERSISTENT RESERVE uses (target/scsi/
// reservations.ts): a host's registration is its I_T nexus key (host NQN and
// listener), so a SCSI initiator and an NVMe host see and preempt each other,
// in this gateway or, with a shared store, in every gateway (docs/nvme.md
// "Reservations").
import { cdw, Status, type NvmeStatus } from '../../protocol/nvme/command.js';
import { PrType, type PrTypeCode } from '../../protocol/scsi/opcodes.js';
import { nexusKey, type LogicalUnit, type Nexus } from '../scsi/index.js';
import type { Outcome } from '../scsi/outcome.js';
import type { Completion, PreparedIo } from './io.js';

/** NVMe reservation types (Base 2.0 §8.19.6, RTYPE 1-6) → SPC-5 PERSISTENT RESERVE types. */
const TO_SCSI: Readonly<Record<number, PrTypeCode>> = {
  1: PrType.WRITE_EXCLUSIVE,
  2: PrType.EXCLUSIVE_ACCESS,
  3: PrType.WRITE_EXCLUSIVE_REGISTRANTS_ONLY,
  4: PrType.EXCLUSIVE_ACCESS_REGISTRANTS_ONLY,
  5: PrType.WRITE_EXCLUSIVE_ALL_REGISTRANTS,
  6: PrType.EXCLUSIVE_ACCESS_ALL_REGISTRANTS,
};
const TO_NVME = new Map(Object.entries(TO_SCSI).map(([n, s]) => [s as number, Number(n)]));

export const ResvOpcode = { Register: 0x0d, Report: 0x0e, Acquire: 0x11, Release: 0x15 } as const;

/** RESCAP (Identify Namespace byte 31): bits 1-6, the six types; no PTPL (bit 0). */
export const RESCAP = 0x7e;

export interface ResvContext {
  readonly nexus: Nexus;
  readonly cntlid: number;
  readonly hostid: Buffer;
}

function statusOf(o: Outcome): NvmeStatus {
  if (o.kind === 'good') return Status.Success;
  if (o.kind === 'status') return Status.ReservationConflict;
  return Status.InvalidField;
}

const done = async (o: Promise<Outcome>): Promise<Completion> => ({ status: statusOf(await o) });

/** A reservation command checked, with the data it needs; undefined for another opcode. */
export function prepareReservation(sqe: Buffer, lu: LogicalUnit, ctx: ResvContext): PreparedIo | { status: NvmeStatus } | undefined {
  const r = lu.reservations;
  const me = () => ({ nexusKey: nexusKey(ctx.nexus), initiator: ctx.nexus.initiator, ...(ctx.nexus.targetPort !== undefined ? { targetPort: ctx.nexus.targetPort } : {}) });
  const c10 = cdw(sqe, 10);
  const action = c10 & 7;
  const iekey = (c10 & 8) !== 0;
  const rtype = (c10 >> 8) & 0xff;
  switch (sqe[0]) {
    case ResvOpcode.Register:
      // CDW10 RREGA 2:0 (0 register, 1 unregister, 2 replace), IEKEY bit 3; data CRKEY 0-7, NRKEY 8-15 (NVM 1.0 §3.2.6).
      if (action > 2) return { status: Status.InvalidField };
      return {
        length: 16,
        dir: 'h2c',
        run: async (d) => {
          const crkey = d!.readBigUInt64LE(0);
          const nrkey = d!.readBigUInt64LE(8);
          const key = me();
          // Key 0 is how SPC-5 unregisters, so it cannot be a key here.
          if (action !== 1 && nrkey === 0n) return { status: Status.InvalidField };
          if (action === 0) {
            const current = r.registrants.find((x) => x.nexusKey === key.nexusKey);
            if (current) return { status: current.key === nrkey ? Status.Success : Status.ReservationConflict };
            return done(r.register(key, 0n, nrkey, false));
          }
          return done(r.register(key, crkey, action === 1 ? 0n : nrkey, iekey));
        },
      };
    case ResvOpcode.Acquire: {
      // CDW10 RACQA 2:0 (0 acquire, 1 preempt, 2 preempt and abort), RTYPE 15:8; data CRKEY 0-7, PRKEY 8-15 (§3.2.5).
      const type = TO_SCSI[rtype];
      if (action > 2 || type === undefined) return { status: Status.InvalidField };
      return {
        length: 16,
        dir: 'h2c',
        run: (d) => {
          const crkey = d!.readBigUInt64LE(0);
          const prkey = d!.readBigUInt64LE(8);
          const k = me().nexusKey;
          return done(action === 0 ? r.reserve(k, crkey, type, 0) : r.preempt(k, crkey, prkey, type, 0));
        },
      };
    }
    case ResvOpcode.Release: {
      // CDW10 RRELA 2:0 (0 release, 1 clear), RTYPE 15:8; data CRKEY 0-7 (§3.2.8).
      const type = TO_SCSI[rtype];
      if (action > 1 || (action === 0 && type === undefined)) return { status: Status.InvalidField };
      return {
        length: 8,
        dir: 'h2c',
        run: (d) => {
          const crkey = d!.readBigUInt64LE(0);
          const k = me().nexusKey;
          return done(action === 0 ? r.release(k, crkey, type!, 0) : r.clear(k, crkey));
        },
      };
    }
    case ResvOpcode.Report: {
      // CDW10 NUMD (0's based dwords), CDW11 EDS bit 0 (§3.2.7).
      const length = (c10 + 1) * 4;
      const eds = (cdw(sqe, 11) & 1) !== 0;
      return { length, dir: 'c2h', run: () => Promise.resolve({ status: Status.Success, data: report(lu, ctx, eds, length) }) };
    }
    default:
      return undefined;
  }
}

/**
 * Reservation Status data (§3.2.7.1): GEN 0-3, RTYPE 4, REGCTL 5-6, PTPLS 9; the
 * header is 24 bytes (64 with EDS), then per registrant 24 bytes (CNTLID 0-1,
 * RCSTS 2, HOSTID 8-15, RKEY 16-23) or with EDS 64 (CNTLID 0-1, RCSTS 2, RKEY
 * 8-15, HOSTID 16-31). A registrant that is not one of this host's queues (a SCSI
 * initiator, another host) has CNTLID FFFFh and host ID 0.
 */
function report(lu: LogicalUnit, ctx: ResvContext, eds: boolean, length: number): Buffer {
  const r = lu.reservations;
  const regs = r.registrants;
  const head = eds ? 64 : 24;
  const each = eds ? 64 : 24;
  const b = Buffer.alloc(Math.max(length, head + each * regs.length));
  b.writeUInt32LE(r.generation >>> 0, 0);
  b[4] = r.reservation ? (TO_NVME.get(r.reservation.type) ?? 0) : 0;
  b.writeUInt16LE(regs.length, 5);
  const mine = nexusKey(ctx.nexus);
  regs.forEach((x, i) => {
    const at = head + each * i;
    const self = x.nexusKey === mine;
    b.writeUInt16LE(self ? ctx.cntlid : 0xffff, at);
    b[at + 2] = r.isHolder(x.nexusKey) ? 1 : 0;
    if (eds) {
      b.writeBigUInt64LE(x.key, at + 8);
      if (self) ctx.hostid.copy(b, at + 16, 0, 16);
    } else {
      if (self) ctx.hostid.copy(b, at + 8, 8, 16);
      b.writeBigUInt64LE(x.key, at + 16);
    }
  });
  return b.subarray(0, length);
}
