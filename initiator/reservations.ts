// Persistent reservations on one volume (SPC-5 5.14, 6.16 PERSISTENT RESERVE
// IN, 6.17 PERSISTENT RESERVE OUT). Registrations belong to the I_T nexus,
// which rblk identifies by initiator name and target port: every connection of
// a session shares them, and they survive a reconnect.
import { persistentReserveIn, persistentReserveOut, prOutParameterList, PR_OUT_PARAMETER_LENGTH } from '../protocol/scsi/cdb.js';
import { isPrType, PrInAction, PrOutAction, PrType, type PrTypeCode } from '../protocol/scsi/opcodes.js';
import { parseReadKeys, parseReadReservation, type ReadKeys, type ReadReservation } from '../protocol/scsi/persistent-reservation.js';
import type { RunCommand } from './discovery.js';

/** Reservation types (SPC-5 6.17.3, table 200). */
export const ReservationType = PrType;
export type ReservationTypeCode = PrTypeCode;
export type { ReadKeys, ReadReservation };

const MAX_KEY = 0xffffffffffffffffn;

function checkKey(name: string, key: bigint): bigint {
  if (typeof key !== 'bigint' || key < 0n || key > MAX_KEY) throw new RangeError(`${name} ${String(key)} is not a 64-bit unsigned bigint`);
  return key;
}

function checkType(type: number): PrTypeCode {
  if (!isPrType(type)) throw new RangeError(`reservation type ${type} is not one of 1, 3, 5, 6, 7, 8 (SPC-5 table 200)`);
  return type;
}

/** `volume.reservations`: PERSISTENT RESERVE OUT actions and IN reports. Conflicts reject RESERVATION_CONFLICT. */
export class Reservations {
  /** @internal */
  constructor(
    private readonly run: RunCommand,
    private readonly lun: number,
    private readonly volume: string,
  ) {}

  private async out(action: number, name: string, key: bigint, serviceActionKey: bigint, type: PrTypeCode | 0 = 0): Promise<void> {
    const data = prOutParameterList({ key: checkKey('key', key), serviceActionKey: checkKey('service action key', serviceActionKey) });
    // Not idempotent: a reissued REGISTER or PREEMPT can conflict with its own first effect.
    await this.run({
      lun: this.lun,
      cdb: persistentReserveOut(action, type, PR_OUT_PARAMETER_LENGTH),
      dataOut: { kind: 'bytes', data },
      idempotent: false,
      what: `PERSISTENT RESERVE OUT ${name} on volume ${this.volume}`,
    });
  }

  /** Registers `key` for this initiator, replacing any key it had (REGISTER AND IGNORE EXISTING KEY). */
  async register(key: bigint): Promise<void> {
    if (checkKey('key', key) === 0n) throw new RangeError('register(0n) would unregister; call unregister()');
    await this.out(PrOutAction.REGISTER_AND_IGNORE_EXISTING_KEY, 'REGISTER AND IGNORE EXISTING KEY', 0n, key);
  }

  /** Removes this initiator's registration (and its reservation, if it held one). */
  async unregister(): Promise<void> {
    await this.out(PrOutAction.REGISTER_AND_IGNORE_EXISTING_KEY, 'REGISTER AND IGNORE EXISTING KEY', 0n, 0n);
  }

  /** Takes the reservation; `key` must be this initiator's registered key. */
  async reserve(key: bigint, type: ReservationTypeCode): Promise<void> {
    await this.out(PrOutAction.RESERVE, 'RESERVE', key, 0n, checkType(type));
  }

  /** Releases the reservation it holds (a no-op when it holds none; the type must match). */
  async release(key: bigint, type: ReservationTypeCode): Promise<void> {
    await this.out(PrOutAction.RELEASE, 'RELEASE', key, 0n, checkType(type));
  }

  /** Removes every registration and the reservation. */
  async clear(key: bigint): Promise<void> {
    await this.out(PrOutAction.CLEAR, 'CLEAR', key, 0n);
  }

  /**
   * Removes the registrations with `victimKey` (and their reservation, which
   * this initiator then holds with `type`). With abort, PREEMPT AND ABORT.
   */
  async preempt(key: bigint, victimKey: bigint, type: ReservationTypeCode, opts: { abort?: boolean } = {}): Promise<void> {
    const action = opts.abort ? PrOutAction.PREEMPT_AND_ABORT : PrOutAction.PREEMPT;
    await this.out(action, opts.abort ? 'PREEMPT AND ABORT' : 'PREEMPT', key, victimKey, checkType(type));
  }

  private async in(action: number, name: string): Promise<Buffer> {
    let length = 1024;
    for (;;) {
      const into = Buffer.alloc(length);
      const r = await this.run({
        lun: this.lun,
        cdb: persistentReserveIn(action, length),
        dataIn: { kind: 'bytes', into },
        idempotent: true,
        what: `PERSISTENT RESERVE IN ${name} on volume ${this.volume}`,
      });
      const data = into.subarray(0, r.dataIn);
      const needed = data.length >= 8 ? 8 + data.readUInt32BE(4) : 0;
      if (needed <= length || length === 0xffff) return data;
      length = Math.min(0xffff, needed);
    }
  }

  /** The registered keys and the PRgeneration. */
  async readKeys(): Promise<ReadKeys> {
    return parseReadKeys(await this.in(PrInAction.READ_KEYS, 'READ KEYS'));
  }

  /** The reservation, if any: its holder's key, scope and type. */
  async readReservation(): Promise<ReadReservation> {
    return parseReadReservation(await this.in(PrInAction.READ_RESERVATION, 'READ RESERVATION'));
  }
}
