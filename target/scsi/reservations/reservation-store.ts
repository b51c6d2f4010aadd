// Where a logical unit's persistent reservation state lives (docs/architecture.md
// "Reservation stores"). PERSISTENT RESERVE OUT reads the state, computes the
// next one (pr-state.ts) and writes it with compare-and-swap, retrying the
// computation when another writer got there first; only then does the
// command complete. The per-command access check reads `state`, a copy the
// store keeps current, synchronously. Two implementations: MemoryReservationStore
// (one process: file, block and memory volumes) and SharedReservationStore
// (shared-reservation-store.ts: one record in the cluster that every gateway
// of the volume watches).
import type { Outcome } from '../outcome.js';
import { EMPTY_PR_STATE, type PrChange, type PrNotice, type PrState } from './pr-state.js';

/** Told of every new state, wherever it was computed, with the unit attentions it raised. */
export type PrListener = (state: PrState, notices: readonly PrNotice[]) => void;

export interface ReservationStore {
  /** The state as last seen; what the access check of every command reads. */
  readonly state: PrState;
  /**
   * False while the store cannot vouch that `state` is the latest (a shared
   * store whose watch broke): commands the reservation governs then wait for
   * whenCurrent, and are answered ABORTED COMMAND, which initiators retry, if
   * it resolves false, rather than checked against a state that may be stale.
   */
  readonly current: boolean;
  /**
   * Resolves true as soon as `current` is true again, or false once the store
   * has waited as long as it will (its own bound) without vouching for its state.
   */
  whenCurrent(): Promise<boolean>;
  /**
   * Applies `compute` to the latest state and stores the result; resolves its
   * outcome once the new state is stored (and, for a shared store, seen by every
   * live gateway). `compute` may run more than once, so it must be pure.
   */
  update(compute: (s: PrState) => PrChange): Promise<Outcome>;
  /** One listener (the LU's reservations); null removes it. */
  listen(fn: PrListener | null): void;
  /** Stops watching; the state is left where it is. */
  close(): Promise<void>;
}

/** The state in this process only: today's behaviour, and every volume's but an rbd one's. */
export class MemoryReservationStore implements ReservationStore {
  #state: PrState = EMPTY_PR_STATE;
  #listener: PrListener | null = null;
  readonly current = true;

  whenCurrent(): Promise<boolean> {
    return Promise.resolve(true);
  }

  get state(): PrState {
    return this.#state;
  }

  // Synchronous underneath: one PERSISTENT RESERVE OUT is atomic with respect
  // to every other command on the event loop.
  update(compute: (s: PrState) => PrChange): Promise<Outcome> {
    const change = compute(this.#state);
    if (change.next !== undefined) {
      this.#state = change.next;
      this.#listener?.(change.next, change.notices);
    }
    return Promise.resolve(change.outcome);
  }

  listen(fn: PrListener | null): void {
    this.#listener = fn;
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
