// The persistent reservation state of one logical unit (SPC-5 5.14) as a
// value, and the PERSISTENT RESERVE OUT state machine as a function from one
// value to the next: a PrDraft starts from a state, a service action changes
// it and lists the unit attentions it raises, and a ReservationStore
// (reservation-store.ts) decides how the new state replaces the old one (at
// once in memory, or by compare-and-swap in a shared store). Nothing here is
// asynchronous, so a computation sees one consistent state.
import { PrType, type PrTypeCode } from '../../../protocol/scsi/opcodes.js';
import {
  INVALID_RELEASE_OF_PERSISTENT_RESERVATION,
  REGISTRATIONS_PREEMPTED,
  RESERVATIONS_PREEMPTED,
  RESERVATIONS_RELEASED,
  type SenseCode,
} from '../../../protocol/scsi/sense-codes.js';
import { check, good, invalidParameter, RESERVATION_CONFLICT, type Outcome } from '../outcome.js';

export interface Registrant {
  /** The I_T nexus (nexus.ts nexusKey): initiator port and target port. */
  readonly nexusKey: string;
  /** The initiator port name, as READ FULL STATUS reports it. */
  readonly initiator: string;
  /** The target port the nexus came in on (absent when the target has one). */
  readonly targetPort?: string;
  readonly key: bigint;
}

export interface Reservation {
  /** The reserving nexus; for the all-registrants types every registrant holds it. */
  readonly holder: string;
  readonly type: PrTypeCode;
  readonly scope: number;
}

export interface PrState {
  /** PRgeneration (SPC-5 6.16.2): bumped by every registration change, wrapping at 2^32. */
  readonly generation: number;
  readonly registrants: readonly Registrant[];
  readonly reservation?: Reservation;
  /** Activate Persist Through Power Loss; rblk refuses to set it (REPORT CAPABILITIES says so), kept for the stores. */
  readonly aptpl: boolean;
}

/** A unit attention a state change raises for one nexus (SPC-5 5.14.11). */
export interface PrNotice {
  readonly nexusKey: string;
  readonly code: SenseCode;
}

/** What a computation produced: its outcome, and the next state if it changed anything. */
export interface PrChange {
  readonly outcome: Outcome;
  readonly next?: PrState;
  readonly notices: readonly PrNotice[];
}

export const EMPTY_PR_STATE: PrState = Object.freeze({ generation: 0, registrants: Object.freeze([]), aptpl: false });

/** The unit attentions a PR change can raise, by name (shared stores carry them as text). */
export const PR_NOTICE_CODES: readonly SenseCode[] = [REGISTRATIONS_PREEMPTED, RESERVATIONS_PREEMPTED, RESERVATIONS_RELEASED];

export function allRegistrants(t: PrTypeCode): boolean {
  return t === PrType.WRITE_EXCLUSIVE_ALL_REGISTRANTS || t === PrType.EXCLUSIVE_ACCESS_ALL_REGISTRANTS;
}

function registrantsOnly(t: PrTypeCode): boolean {
  return t === PrType.WRITE_EXCLUSIVE_REGISTRANTS_ONLY || t === PrType.EXCLUSIVE_ACCESS_REGISTRANTS_ONLY;
}

/** SPC-5 5.14.10: for all-registrants types every registrant is a holder. */
export function isHolder(s: PrState, nexusKey: string): boolean {
  const r = s.reservation;
  if (!r) return false;
  return allRegistrants(r.type) ? s.registrants.some((x) => x.nexusKey === nexusKey) : r.holder === nexusKey;
}

/** The identity of a nexus, as a registration records it. */
export interface NexusIdentity {
  readonly nexusKey: string;
  readonly initiator: string;
  readonly targetPort?: string;
}

/** One PERSISTENT RESERVE OUT applied to a copy of the state. */
export class PrDraft {
  #generation: number;
  readonly #registrants: Map<string, Registrant>;
  #reservation: Reservation | undefined;
  readonly #aptpl: boolean;
  #changed = false;
  readonly #notices: PrNotice[] = [];

  constructor(s: PrState) {
    this.#generation = s.generation;
    this.#registrants = new Map(s.registrants.map((r) => [r.nexusKey, r]));
    this.#reservation = s.reservation;
    this.#aptpl = s.aptpl;
  }

  /** The outcome with the state it leads to; a failed or no-op action changes nothing. */
  result(outcome: Outcome): PrChange {
    if (!this.#changed) return { outcome, notices: [] };
    const next: PrState = {
      generation: this.#generation,
      registrants: [...this.#registrants.values()],
      ...(this.#reservation ? { reservation: this.#reservation } : {}),
      aptpl: this.#aptpl,
    };
    return { outcome, next, notices: this.#notices };
  }

  #notify(nexusKey: string, code: SenseCode): void {
    this.#notices.push({ nexusKey, code });
  }

  #setReservation(r: Reservation | undefined): void {
    this.#reservation = r;
    this.#changed = true;
  }

  #isHolder(nexusKey: string): boolean {
    const r = this.#reservation;
    if (!r) return false;
    return allRegistrants(r.type) ? this.#registrants.has(nexusKey) : r.holder === nexusKey;
  }

  #bump(): void {
    this.#generation = (this.#generation + 1) >>> 0;
    this.#changed = true;
  }

  #notifyRegistrants(code: SenseCode, except: string): void {
    for (const k of this.#registrants.keys()) if (k !== except) this.#notify(k, code);
  }

  /** Drops one registration; a holder of a non-all-registrants reservation loses it (SPC-5 5.14.11.2.2). */
  #unregister(nexusKey: string): void {
    this.#registrants.delete(nexusKey);
    this.#changed = true;
    const r = this.#reservation;
    if (!r) return;
    if (allRegistrants(r.type)) {
      // The reservation lasts while any registrant remains (SPC-5 5.14.10).
      if (this.#registrants.size === 0) this.#setReservation(undefined);
      return;
    }
    if (r.holder !== nexusKey) return;
    this.#setReservation(undefined);
    if (registrantsOnly(r.type)) this.#notifyRegistrants(RESERVATIONS_RELEASED, nexusKey);
  }

  /**
   * REGISTER (ignoreKey false) and REGISTER AND IGNORE EXISTING KEY (true),
   * SPC-5 5.14.7.
   */
  register(me: NexusIdentity, key: bigint, saKey: bigint, ignoreKey: boolean): Outcome {
    const current = this.#registrants.get(me.nexusKey);
    if (!current) {
      // An unregistered nexus must send key 0 for REGISTER (SPC-5 5.14.7 a).
      if (!ignoreKey && key !== 0n) return RESERVATION_CONFLICT;
      if (saKey === 0n) return good();
      const reg: Registrant = {
        nexusKey: me.nexusKey,
        initiator: me.initiator,
        ...(me.targetPort === undefined ? {} : { targetPort: me.targetPort }),
        key: saKey,
      };
      this.#registrants.set(me.nexusKey, reg);
      this.#bump();
      return good();
    }
    if (!ignoreKey && key !== current.key) return RESERVATION_CONFLICT;
    if (saKey === 0n) this.#unregister(me.nexusKey);
    else this.#registrants.set(me.nexusKey, { ...current, key: saKey });
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
      this.#setReservation({ holder: nexusKey, type, scope });
      return good();
    }
    // The holder may repeat its own reservation; anything else conflicts.
    return this.#isHolder(nexusKey) && r.type === type && r.scope === scope ? good() : RESERVATION_CONFLICT;
  }

  /** RELEASE (SPC-5 5.14.11.2). */
  release(nexusKey: string, key: bigint, type: PrTypeCode, scope: number): Outcome {
    if (!this.#registeredWith(nexusKey, key)) return RESERVATION_CONFLICT;
    const r = this.#reservation;
    if (!r || !this.#isHolder(nexusKey)) return good();
    if (r.type !== type || r.scope !== scope) return check(INVALID_RELEASE_OF_PERSISTENT_RESERVATION);
    this.#setReservation(undefined);
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
    this.#setReservation(undefined);
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
      this.#setReservation({ holder: nexusKey, type, scope });
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
      this.#setReservation({ holder: nexusKey, type, scope });
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
    if (allRegistrants(r.type) ? this.#registrants.size === 0 : r.holder === nexusKey) this.#setReservation(undefined);
  }
}
