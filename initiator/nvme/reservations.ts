// Reservations on one NVMe namespace from the host (Base 2.0 §8.19; NVM
// Command Set 1.0 §3.2.5 Reservation Acquire, §3.2.6 Register, §3.2.7
// Report, §3.2.8 Release), with the calls and result shapes of the SCSI
// volume's `reservations` (initiator/reservations.ts): keys are bigints,
// types are SPC-5 PERSISTENT RESERVE types (ReservationType), mapped to and
// from NVMe's RTYPE 1-6 (Base 2.0 §8.19.6, Figure "Reservation Type
// Encoding"), so code written for one runs on the other.
import { buildSqe, IoOpcode, reservationKeys as keys } from '../../protocol/nvme/command.js';
import { isPrType, PrType, type PrTypeCode } from '../../protocol/scsi/opcodes.js';
import type { ReadKeys, ReadReservation } from '../../protocol/scsi/persistent-reservation.js';
import { RblkError } from '../errors.js';
import type { Command } from './queue.js';

/** SPC-5 type → NVMe RTYPE (Base 2.0 §8.19.6). */
const TO_NVME: Readonly<Record<PrTypeCode, number>> = {
  [PrType.WRITE_EXCLUSIVE]: 1,
  [PrType.EXCLUSIVE_ACCESS]: 2,
  [PrType.WRITE_EXCLUSIVE_REGISTRANTS_ONLY]: 3,
  [PrType.EXCLUSIVE_ACCESS_REGISTRANTS_ONLY]: 4,
  [PrType.WRITE_EXCLUSIVE_ALL_REGISTRANTS]: 5,
  [PrType.EXCLUSIVE_ACCESS_ALL_REGISTRANTS]: 6,
};
const TO_SCSI = new Map<number, PrTypeCode>(Object.entries(TO_NVME).map(([s, n]) => [n, Number(s) as PrTypeCode]));

const MAX_KEY = 0xffffffffffffffffn;
/** Reservation Status header and registrant sizes with EDS set (NVM 1.0 §3.2.7.1, Figure "Reservation Status Data Structure – Extended"). */
const EXT_HEAD = 64;
const EXT_ENTRY = 64;

function checkKey(name: string, key: bigint): bigint {
  if (typeof key !== 'bigint' || key < 0n || key > MAX_KEY) throw new RangeError(`${name} ${String(key)} is not a 64-bit unsigned bigint`);
  return key;
}

function rtype(type: number): number {
  if (!isPrType(type)) throw new RangeError(`reservation type ${type} is not one of 1, 3, 5, 6, 7, 8 (SPC-5 table 200)`);
  return TO_NVME[type];
}

/** One registrant of a Reservation Report (extended data structure). */
export interface NvmeRegistrant {
  /** The controller, or FFFFh when the registrant is not one the controller names (another host, a SCSI initiator). */
  cntlid: number;
  /** RCSTS bit 0: it holds the reservation. */
  holder: boolean;
  /** The 128-bit Host Identifier, hex (zeroes when the controller does not give it). */
  hostid: string;
  key: bigint;
}

/** A Reservation Report (NVM 1.0 §3.2.7.1). */
export interface NvmeReservationStatus {
  generation: number;
  /** The SPC-5 type of the reservation, or 0 when none is held. */
  type: PrTypeCode | 0;
  /** PTPLS: persist through power loss. */
  ptpl: boolean;
  registrants: NvmeRegistrant[];
}

type Run = (cmd: Command, what: string) => Promise<Buffer | null>;

/** `volume.reservations` of an NvmeVolume. A conflict rejects RESERVATION_CONFLICT. */
export class NvmeReservations {
  /** @internal */
  constructor(
    private readonly run: Run,
    private readonly nsid: number,
    private readonly hostid: Buffer,
  ) {}

  #what(name: string): string {
    return `${name} on namespace ${this.nsid}`;
  }

  /** A Register/Acquire/Release: never reissued after a lost queue, since a second one could conflict with the first's effect. */
  async #out(opcode: number, cdw10: number, data: Buffer, name: string): Promise<void> {
    const sqe = buildSqe({ opcode, cid: 0, nsid: this.nsid, cdw: { 10: cdw10 } });
    await this.run({ sqe, write: data, idempotent: false }, this.#what(name));
  }

  /**
   * Registers `key` for this host, replacing any key it had: Register
   * (RREGA 000b), and when the host already holds another key, Replace
   * (RREGA 010b) with IEKEY, as SPC-5's REGISTER AND IGNORE EXISTING KEY does.
   */
  async register(key: bigint): Promise<void> {
    if (checkKey('key', key) === 0n) throw new RangeError('register(0n) would unregister; call unregister()');
    try {
      await this.#out(IoOpcode.ReservationRegister, 0, keys(0n, key), 'Reservation Register');
    } catch (e) {
      // A registered host with another key is a conflict for Register (Base 2.0 §8.19.2).
      if (!(e instanceof RblkError) || e.code !== 'RESERVATION_CONFLICT') throw e;
      await this.#out(IoOpcode.ReservationRegister, 2 | (1 << 3), keys(0n, key), 'Reservation Register (replace, IEKEY)');
    }
  }

  /** Removes this host's registration (and its reservation, if it held one); nothing when it has none. */
  async unregister(): Promise<void> {
    try {
      // RREGA 001b with IEKEY: CRKEY not checked (NVM 1.0 §3.2.6, CDW10 bit 3).
      await this.#out(IoOpcode.ReservationRegister, 1 | (1 << 3), keys(0n, 0n), 'Reservation Register (unregister)');
    } catch (e) {
      // Unregistering a host that is not registered is a conflict in NVMe and nothing in SPC-5: the SCSI call's meaning.
      if (!(e instanceof RblkError) || e.code !== 'RESERVATION_CONFLICT') throw e;
      if ((await this.report()).registrants.some((r) => r.hostid === this.hostid.toString('hex'))) throw e;
    }
  }

  /** Acquires the reservation (RACQA 000b); `key` must be this host's key. */
  async reserve(key: bigint, type: PrTypeCode): Promise<void> {
    await this.#out(IoOpcode.ReservationAcquire, rtype(type) << 8, keys(checkKey('key', key), 0n), 'Reservation Acquire');
  }

  /** Releases the reservation it holds (RRELA 000b); the type must match. */
  async release(key: bigint, type: PrTypeCode): Promise<void> {
    const d = Buffer.alloc(8);
    d.writeBigUInt64LE(checkKey('key', key));
    await this.#out(IoOpcode.ReservationRelease, rtype(type) << 8, d, 'Reservation Release');
  }

  /** Removes every registration and the reservation (RRELA 001b, Clear). */
  async clear(key: bigint): Promise<void> {
    const d = Buffer.alloc(8);
    d.writeBigUInt64LE(checkKey('key', key));
    await this.#out(IoOpcode.ReservationRelease, 1, d, 'Reservation Release (clear)');
  }

  /**
   * Removes the registrations with `victimKey` (and their reservation, which
   * this host then holds with `type`): Acquire RACQA 001b, or 010b
   * (preempt and abort) with `abort`.
   */
  async preempt(key: bigint, victimKey: bigint, type: PrTypeCode, opts: { abort?: boolean } = {}): Promise<void> {
    const action = opts.abort === true ? 2 : 1;
    await this.#out(IoOpcode.ReservationAcquire, action | (rtype(type) << 8), keys(checkKey('key', key), checkKey('victim key', victimKey)), opts.abort === true ? 'Reservation Acquire (preempt and abort)' : 'Reservation Acquire (preempt)');
  }

  /**
   * Reservation Report with the extended data structure (EDS, CDW11 bit 0:
   * 128-bit host identifiers, which Linux nvmet requires), read again longer
   * when REGCTL says more registrants than fit.
   */
  async report(): Promise<NvmeReservationStatus> {
    let length = EXT_HEAD + 16 * EXT_ENTRY;
    for (;;) {
      // NUMD (CDW10) is 0's based dwords (NVM 1.0 §3.2.7).
      const sqe = buildSqe({ opcode: IoOpcode.ReservationReport, cid: 0, nsid: this.nsid, cdw: { 10: length / 4 - 1, 11: 1 } });
      const d = await this.run({ sqe, readLength: length }, this.#what('Reservation Report'));
      if (d === null || d.length < EXT_HEAD) throw new RblkError('IO_ERROR', `${this.#what('Reservation Report')}: ${d?.length ?? 0} bytes, less than the 64-byte header`);
      const regctl = d.readUInt16LE(5);
      const needed = EXT_HEAD + regctl * EXT_ENTRY;
      if (needed > length && length < 1 << 20) {
        length = Math.min(1 << 20, needed);
        continue;
      }
      const registrants: NvmeRegistrant[] = [];
      for (let i = 0; i < regctl && EXT_HEAD + (i + 1) * EXT_ENTRY <= d.length; i++) {
        const at = EXT_HEAD + i * EXT_ENTRY;
        // Registrant (extended): CNTLID 0-1, RCSTS 2, RKEY 8-15, HOSTID 16-31.
        registrants.push({ cntlid: d.readUInt16LE(at), holder: (d[at + 2] & 1) !== 0, key: d.readBigUInt64LE(at + 8), hostid: d.subarray(at + 16, at + 32).toString('hex') });
      }
      // Header: GEN 0-3, RTYPE 4, REGCTL 5-6, PTPLS 9.
      return { generation: d.readUInt32LE(0), type: TO_SCSI.get(d[4]) ?? 0, ptpl: (d[9] & 1) !== 0, registrants };
    }
  }

  /** The registered keys and the generation, as the SCSI volume's readKeys() gives them. */
  async readKeys(): Promise<ReadKeys> {
    const r = await this.report();
    return { generation: r.generation, keys: r.registrants.map((x) => x.key) };
  }

  /**
   * The reservation, if any, as the SCSI volume's readReservation() gives it:
   * the holder's key (0 for the all-registrants types, SPC-5 6.16.3), scope 0
   * (a namespace is the logical unit), and the SPC-5 type.
   */
  async readReservation(): Promise<ReadReservation> {
    const r = await this.report();
    if (r.type === 0) return { generation: r.generation };
    const allRegistrants = r.type === PrType.WRITE_EXCLUSIVE_ALL_REGISTRANTS || r.type === PrType.EXCLUSIVE_ACCESS_ALL_REGISTRANTS;
    const holder = r.registrants.find((x) => x.holder);
    return { generation: r.generation, reservation: { key: allRegistrants ? 0n : (holder?.key ?? 0n), scope: 0, type: r.type } };
  }
}
