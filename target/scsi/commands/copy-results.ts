// What RECEIVE COPY RESULTS / COPY STATUS (SPC-4 6.18.3) reports: the outcome
// of each EXTENDED COPY whose LIST ID USAGE asked the copy manager to hold it
// (00b, 01b), per I_T nexus and list identifier. Bounded, oldest dropped
// first, and forgotten with the nexus (SPC-4 5.17.4.3: held data goes with
// the I_T nexus).

export interface CopyResult {
  /** COPY MANAGER STATUS: 01h completed without errors, 02h completed with errors. */
  readonly status: number;
  readonly segmentsProcessed: number;
  /** Bytes written to the copy targets. */
  readonly bytes: number;
}

/** Enough for any initiator that reads its results back before its next copies. */
const MAX_HELD = 64;

export class CopyResults {
  readonly #held = new Map<string, CopyResult>();

  static key(nexusKey: string, listId: number): string {
    return `${nexusKey}\u0000${listId}`;
  }

  hold(nexusKey: string, listId: number, r: CopyResult): void {
    const k = CopyResults.key(nexusKey, listId);
    this.#held.delete(k);
    this.#held.set(k, r);
    if (this.#held.size > MAX_HELD) this.#held.delete(this.#held.keys().next().value!);
  }

  get(nexusKey: string, listId: number): CopyResult | undefined {
    return this.#held.get(CopyResults.key(nexusKey, listId));
  }

  forget(nexusKey: string): void {
    for (const k of [...this.#held.keys()]) if (k.startsWith(`${nexusKey}\u0000`)) this.#held.delete(k);
  }
}
