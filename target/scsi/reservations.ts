// Persistent reservations (SPC-5 5.14.*, 6.16, 6.17) and the older
// RESERVE(6)/RELEASE(6) reservation (SPC-2 7.21), for one logical unit.
// All state changes are synchronous, so one PERSISTENT RESERVE OUT is atomic
// with respect to every other command on the event loop.
import { PrType, type PrTypeCode } from '../../protocol/scsi/opcodes.js';
import {
  INVALID_RELEASE_OF_PERSISTENT_RESERVATION,
  REGISTRATIONS_PREEMPTED,
  RESERVATIONS_PREEMPTED,
  RESERVATIONS_RELEASED,
  type SenseCode,
} from '../../protocol/scsi/sense-codes.js';
import { check, good, invalidParameter, RESERVATION_CONFLICT, type Outcome } from './outcome.js';

/** How a command is treated under a reservation it does not hold (SPC-5 table 69, SBC-4 table 13). */
export type PrClass = 'exempt' | 'read' | 'write';

export interface Registrant {
  readonly nexusKey: string;
  readonly initiator: string;
  readonly key: bigint;
}

export interface Reservation {
  /** The reserving nexus; for the all-registrants types every registrant holds it. */
  readonly holder: string;
  readonly type: PrTypeCode;
  readonly scope: number;
}

type Notify = (nexusKey: string, code: SenseCode) => void;

function allRegistrants(t: PrTypeCode): boolean {
  return t === PrType.WRITE_EXCLUSIVE_ALL_REGISTRANTS || t === PrType.EXCLUSIVE_ACCESS_ALL_REGISTRANTS;
}

function registrantsOnly(t: PrTypeCode): boolean {
  return t === PrType.WRITE_EXCLUSIVE_REGISTRANTS_ONLY || t === PrType.EXCLUSIVE_ACCESS_REGISTRANTS_ONLY;
}

export class Reservations {
  /** PRgeneration (SPC-5 6.16.2): bumped by every registration change, wrapping at 2^32. */
  #generation = 0;
  readonly #registrants = new Map<string, Registrant>();
  #reservation: Reservation | undefined;
  #legacyHolder: string | undefined;
  readonly #notify: Notify;

  constructor(notify: Notify) {
    this.#notify = notify;
  }

  get generation(): number {
    return this.#generation;
  }

  get reservation(): Reservation | undefined {
    return this.#reservation;
  }

  get registrants(): readonly Registrant[] {
    return [...this.#registrants.values()];
  }

  /** The RESERVE(6) holder, if any. */
  get legacyHolder(): string | undefined {
    return this.#legacyHolder;
  }

  isRegistered(nexusKey: string): boolean {
    return this.#registrants.has(nexusKey);
  }

  /** SPC-5 5.14.10: for all-registrants types every registrant is a holder. */
  isHolder(nexusKey: string): boolean {
    const r = this.#reservation;
    if (!r) return false;
    return allRegistrants(r.type) ? this.#registrants.has(nexusKey) : r.holder === nexusKey;
  }

  /**
   * Whether a command from this nexus meets RESERVATION CONFLICT. Write
   * Exclusive lets everyone read; Exclusive Access lets nobody else in; the
   * registrants-only and all-registrants types admit every registrant.
   */
  conflicts(nexusKey: string, cls: PrClass, legacyExempt: boolean): boolean {
    if (this.#legacyHolder !== undefined && this.#legacyHolder !== nexusKey && !legacyExempt) return true;
    const r = this.#reservation;
    if (cls === 'exempt' || !r || this.isHolder(nexusKey)) return false;
    switch (r.type) {
      case PrType.WRITE_EXCLUSIVE:
        return cls === 'write';
      case PrType.EXCLUSIVE_ACCESS:
        return true;
      case PrType.WRITE_EXCLUSIVE_REGISTRANTS_ONLY:
      case PrType.WRITE_EXCLUSIVE_ALL_REGISTRANTS:
        return !this.#registrants.has(nexusKey) && cls === 'write';
      case PrType.EXCLUSIVE_ACCESS_REGISTRANTS_ONLY:
      case PrType.EXCLUSIVE_ACCESS_ALL_REGISTRANTS:
        return !this.#registrants.has(nexusKey);
    }
  }

  #bump(): void {
    this.#generation = (this.#generation + 1) >>> 0;
  }

  #notifyRegistrants(code: SenseCode, except: string): void {
    for (const k of this.#registrants.keys()) if (k !== except) this.#notify(k, code);
  }

  /** Drops one registration; a holder of a non-all-registrants reservation loses it (SPC-5 5.14.11.2.2). */
  #unregister(nexusKey: string): void {
    this.#registrants.delete(nexusKey);
    const r = this.#reservation;
    if (!r) return;
    if (allRegistrants(r.type)) {
      // The reservation lasts while any registrant remains (SPC-5 5.14.10).
      if (this.#registrants.size === 0) this.#reservation = undefined;
      return;
    }
    if (r.holder !== nexusKey) return;
    this.#reservation = undefined;
    if (registrantsOnly(r.type)) this.#notifyRegistrants(RESERVATIONS_RELEASED, nexusKey);
  }

  /**
   * REGISTER (ignoreKey false) and REGISTER AND IGNORE EXISTING KEY (true),
   * SPC-5 5.14.7.
   */
  register(nexusKey: string, initiator: string, key: bigint, saKey: bigint, ignoreKey: boolean): Outcome {
    const current = this.#registrants.get(nexusKey);
    if (!current) {
      // An unregistered nexus must send key 0 for REGISTER (SPC-5 5.14.7 a).
      if (!ignoreKey && key !== 0n) return RESERVATION_CONFLICT;
      if (saKey === 0n) return good();
      this.#registrants.set(nexusKey, { nexusKey, initiator, key: saKey });
      this.#bump();
      return good();
    }
    if (!ignoreKey && key !== current.key) return RESERVATION_CONFLICT;
    if (saKey === 0n) this.#unregister(nexusKey);
    else this.#registrants.set(nexusKey, { ...current, key: saKey });
    this.#bump();
    return good();
  }

  /** The checks every other service action starts with (SPC-5 5.14.1): registered, key matches. */
  #registeredWith(nexusKey: string, key: bigint): boolean {
    return this.#registrants.get(nexusKey)?.key === key;
  }

  /** RESERVE (SPC-5 5.14.9). */
  reserve(nexusKey: string, key: bigint, type: PrTypeCode, scope: number): Outcome {
    if (!this.#registeredWith(nexusKey, key)) return RESERVATION_CONFLICT;
    const r = this.#reservation;
    if (!r) {
      this.#reservation = { holder: nexusKey, type, scope };
      return good();
    }
    // The holder may repeat its own reservation; anything else conflicts.
    return this.isHolder(nexusKey) && r.type === type && r.scope === scope ? good() : RESERVATION_CONFLICT;
  }

  /** RELEASE (SPC-5 5.14.11.2). */
  release(nexusKey: string, key: bigint, type: PrTypeCode, scope: number): Outcome {
    if (!this.#registeredWith(nexusKey, key)) return RESERVATION_CONFLICT;
    const r = this.#reservation;
    if (!r || !this.isHolder(nexusKey)) return good();
    if (r.type !== type || r.scope !== scope) return check(INVALID_RELEASE_OF_PERSISTENT_RESERVATION);
    this.#reservation = undefined;
    // Releasing a registrants-only or all-registrants reservation tells the
    // other registrants (SPC-5 5.14.11.2.1).
    if (r.type !== PrType.WRITE_EXCLUSIVE && r.type !== PrType.EXCLUSIVE_ACCESS) {
      this.#notifyRegistrants(RESERVATIONS_RELEASED, nexusKey);
    }
    return good();
  }

  /** CLEAR (SPC-5 5.14.11.2.3). */
  clear(nexusKey: string, key: bigint): Outcome {
    if (!this.#registeredWith(nexusKey, key)) return RESERVATION_CONFLICT;
    this.#notifyRegistrants(RESERVATIONS_PREEMPTED, nexusKey);
    this.#registrants.clear();
    this.#reservation = undefined;
    this.#bump();
    return good();
  }

  /** PREEMPT and PREEMPT AND ABORT (SPC-5 5.14.11.4). */
  preempt(nexusKey: string, key: bigint, saKey: bigint, type: PrTypeCode, scope: number): Outcome {
    if (!this.#registeredWith(nexusKey, key)) return RESERVATION_CONFLICT;
    const r = this.#reservation;

    if (r && allRegistrants(r.type) && saKey === 0n) {
      // 5.14.11.4.4 b: preempt every other registrant and take a new reservation.
      for (const k of [...this.#registrants.keys()]) {
        if (k === nexusKey) continue;
        this.#registrants.delete(k);
        this.#notify(k, REGISTRATIONS_PREEMPTED);
      }
      this.#reservation = { holder: nexusKey, type, scope };
      this.#bump();
      return good();
    }

    const holderKey = r && !allRegistrants(r.type) ? this.#registrants.get(r.holder)?.key : undefined;
    if (r && holderKey !== undefined && saKey === holderKey) {
      // 5.14.11.4.3: preempting the holder moves the reservation.
      for (const reg of [...this.#registrants.values()]) {
        if (reg.key !== saKey || reg.nexusKey === nexusKey) continue;
        this.#registrants.delete(reg.nexusKey);
        this.#notify(reg.nexusKey, REGISTRATIONS_PREEMPTED);
      }
      this.#reservation = { holder: nexusKey, type, scope };
      if (r.type !== type || r.scope !== scope) {
        // Survivors learn the reservation changed under them.
        this.#notifyRegistrants(RESERVATIONS_RELEASED, nexusKey);
      }
      this.#bump();
      return good();
    }

    // 5.14.11.4.2: remove the registrations holding saKey; zero names nobody.
    if (saKey === 0n) return invalidParameter(8);
    const victims = [...this.#registrants.values()].filter((reg) => reg.key === saKey);
    if (victims.length === 0) return RESERVATION_CONFLICT;
    for (const v of victims) {
      this.#unregisterQuietly(v.nexusKey);
      if (v.nexusKey !== nexusKey) this.#notify(v.nexusKey, REGISTRATIONS_PREEMPTED);
    }
    this.#bump();
    return good();
  }

  /** Like #unregister, but a preempted holder's loss is reported as preemption, not release. */
  #unregisterQuietly(nexusKey: string): void {
    this.#registrants.delete(nexusKey);
    const r = this.#reservation;
    if (!r) return;
    if (allRegistrants(r.type) ? this.#registrants.size === 0 : r.holder === nexusKey) this.#reservation = undefined;
  }

  /** RESERVE(6) (SPC-2 7.21): refused while persistent reservations are in use. */
  reserveLegacy(nexusKey: string): Outcome {
    if (this.#registrants.size > 0 || this.#reservation) return RESERVATION_CONFLICT;
    if (this.#legacyHolder !== undefined && this.#legacyHolder !== nexusKey) return RESERVATION_CONFLICT;
    this.#legacyHolder = nexusKey;
    return good();
  }

  /** RELEASE(6): a no-op for anyone but the holder (SPC-2 7.17). */
  releaseLegacy(nexusKey: string): Outcome {
    if (this.#legacyHolder === nexusKey) this.#legacyHolder = undefined;
    return good();
  }

  /** An LU reset or I_T nexus loss ends a RESERVE(6) reservation (SPC-2 5.5.1); PR state survives. */
  dropLegacy(nexusKey?: string): void {
    if (nexusKey === undefined || this.#legacyHolder === nexusKey) this.#legacyHolder = undefined;
  }
}
