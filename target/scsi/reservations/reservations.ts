// Persistent reservations (SPC-5 5.14.*, 6.16, 6.17) and the older
// RESERVE(6)/RELEASE(6) reservation (SPC-2 7.21), for one logical unit. The
// persistent state is a ReservationStore's (reservation-store.ts: in memory,
// or shared by every gateway of the volume); the service actions are
// pr-state.ts's PrDraft, computed against the store's latest state and
// written back by compare-and-swap. RESERVE(6) stays in this process: it
// belongs to one I_T nexus and ends with it (SPC-2 5.5.1).
import { PrType, type PrTypeCode } from '../../../protocol/scsi/opcodes.js';
import type { SenseCode } from '../../../protocol/scsi/sense-codes.js';
import { good, RESERVATION_CONFLICT, type Outcome } from '../outcome.js';
import { isHolder, PrDraft, type NexusIdentity, type PrState, type Registrant, type Reservation } from './pr-state.js';
import { MemoryReservationStore, type ReservationStore } from './reservation-store.js';

export type { Registrant, Reservation } from './pr-state.js';

/** How a command is treated under a reservation it does not hold (SPC-5 table 69, SBC-4 table 13). */
export type PrClass = 'exempt' | 'read' | 'write';

type Notify = (nexusKey: string, code: SenseCode) => void;

export class Reservations {
  #legacyHolder: string | undefined;
  readonly #notify: Notify;
  readonly #store: ReservationStore;
  /** Called after the persistent state changed (here or through another gateway). */
  onChange: (() => void) | null = null;
  /**
   * Also told each notice (nexus key, SPC-5 5.14.11 unit attention) a change
   * raised, here or through another gateway: the NVMe controllers' reservation
   * notification log (target/nvme/controller.ts) listens here.
   */
  readonly noticeListeners = new Set<Notify>();

  constructor(notify: Notify, store: ReservationStore = new MemoryReservationStore()) {
    this.#notify = notify;
    this.#store = store;
    store.listen((_state, notices) => {
      for (const n of notices) {
        this.#notify(n.nexusKey, n.code);
        for (const l of this.noticeListeners) l(n.nexusKey, n.code);
      }
      this.onChange?.();
    });
  }

  get store(): ReservationStore {
    return this.#store;
  }

  get #state(): PrState {
    return this.#store.state;
  }

  get generation(): number {
    return this.#state.generation;
  }

  get reservation(): Reservation | undefined {
    return this.#state.reservation;
  }

  get registrants(): readonly Registrant[] {
    return this.#state.registrants;
  }

  /** False while a shared store cannot vouch for its copy (reservation-store.ts). */
  get current(): boolean {
    return this.#store.current;
  }

  /** True once the store vouches for its state again, false when it gives up waiting (reservation-store.ts). */
  whenCurrent(): Promise<boolean> {
    return this.#store.whenCurrent();
  }

  /** The RESERVE(6) holder, if any. */
  get legacyHolder(): string | undefined {
    return this.#legacyHolder;
  }

  isRegistered(nexusKey: string): boolean {
    return this.#state.registrants.some((r) => r.nexusKey === nexusKey);
  }

  /** SPC-5 5.14.10: for all-registrants types every registrant is a holder. */
  isHolder(nexusKey: string): boolean {
    return isHolder(this.#state, nexusKey);
  }

  /**
   * Whether a command from this nexus meets RESERVATION CONFLICT. Write
   * Exclusive lets everyone read; Exclusive Access lets nobody else in; the
   * registrants-only and all-registrants types admit every registrant.
   */
  conflicts(nexusKey: string, cls: PrClass, legacyExempt: boolean): boolean {
    if (this.#legacyHolder !== undefined && this.#legacyHolder !== nexusKey && !legacyExempt) return true;
    const s = this.#state;
    const r = s.reservation;
    if (cls === 'exempt' || !r || isHolder(s, nexusKey)) return false;
    const registered = (): boolean => s.registrants.some((x) => x.nexusKey === nexusKey);
    switch (r.type) {
      case PrType.WRITE_EXCLUSIVE:
        return cls === 'write';
      case PrType.EXCLUSIVE_ACCESS:
        return true;
      case PrType.WRITE_EXCLUSIVE_REGISTRANTS_ONLY:
      case PrType.WRITE_EXCLUSIVE_ALL_REGISTRANTS:
        return cls === 'write' && !registered();
      case PrType.EXCLUSIVE_ACCESS_REGISTRANTS_ONLY:
      case PrType.EXCLUSIVE_ACCESS_ALL_REGISTRANTS:
        return !registered();
    }
  }

  #run(action: (d: PrDraft) => Outcome): Promise<Outcome> {
    return this.#store.update((s) => {
      const d = new PrDraft(s);
      return d.result(action(d));
    });
  }

  /** REGISTER and REGISTER AND IGNORE EXISTING KEY (SPC-5 5.14.7). */
  register(me: NexusIdentity, key: bigint, saKey: bigint, ignoreKey: boolean): Promise<Outcome> {
    return this.#run((d) => d.register(me, key, saKey, ignoreKey));
  }

  reserve(nexusKey: string, key: bigint, type: PrTypeCode, scope: number): Promise<Outcome> {
    return this.#run((d) => d.reserve(nexusKey, key, type, scope));
  }

  release(nexusKey: string, key: bigint, type: PrTypeCode, scope: number): Promise<Outcome> {
    return this.#run((d) => d.release(nexusKey, key, type, scope));
  }

  clear(nexusKey: string, key: bigint): Promise<Outcome> {
    return this.#run((d) => d.clear(nexusKey, key));
  }

  preempt(nexusKey: string, key: bigint, saKey: bigint, type: PrTypeCode, scope: number): Promise<Outcome> {
    return this.#run((d) => d.preempt(nexusKey, key, saKey, type, scope));
  }

  /** RESERVE(6) (SPC-2 7.21): refused while persistent reservations are in use. */
  reserveLegacy(nexusKey: string): Outcome {
    if (this.#state.registrants.length > 0 || this.#state.reservation) return RESERVATION_CONFLICT;
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
