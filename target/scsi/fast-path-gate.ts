// Which sessions may run this logical unit's READs and WRITEs on the native
// fast path (docs/target.md "Fast path"), and the one way to take that away.
// Each session that maps the LU with a fast path binds here; the gate allows
// a binding only while nothing the fast path does not check could change a
// READ's or WRITE's answer: no unit attention pending for that nexus, no
// reservation or registration of any kind, and nobody holding the LU for a
// command that needs it to itself (COMPARE AND WRITE, PERSISTENT RESERVE OUT,
// RESERVE and RELEASE, MODE SELECT), for task management, or for a capacity
// change, or a target port group state that refuses media access (ALUA
// standby or unavailable, port-groups.ts). Revocation is synchronous: the fast path runs on this thread, so
// once revoke() returns no new command starts there, and hold() also waits
// until those already running have answered.
import type { LogicalUnit } from './logical-unit.js';

export interface FastPathBinding {
  readonly nexusKey: string;
  /** Publishes the current eligibility record and allows the fast path (or revokes it, when the session says no). */
  allow(): void;
  revoke(): void;
  /** Resolves when none of this binding's fast-path commands is running. */
  idle(): Promise<void>;
}

export class FastPathGate {
  readonly #bindings = new Set<FastPathBinding>();
  #holds = 0;

  constructor(private readonly lu: LogicalUnit) {}

  /** Adds a binding, decided at once; the function returned revokes and removes it. */
  bind(b: FastPathBinding): () => void {
    this.#bindings.add(b);
    this.#decide(b);
    return () => {
      if (this.#bindings.delete(b)) b.revoke();
    };
  }

  get held(): boolean {
    return this.#holds > 0;
  }

  /** Re-decides every binding; called whenever the state it depends on may have changed. */
  refresh(): void {
    for (const b of this.#bindings) this.#decide(b);
  }

  /** Runs fn with the fast path revoked for every session, once its running commands have answered. */
  async hold<T>(fn: () => Promise<T> | T): Promise<T> {
    this.#holds++;
    try {
      for (const b of this.#bindings) b.revoke();
      await Promise.all([...this.#bindings].map((b) => b.idle()));
      return await fn();
    } finally {
      this.#holds--;
      this.refresh();
    }
  }

  /** Resolves when no bound session runs a fast-path command on this LU. */
  idle(): Promise<void> {
    return Promise.all([...this.#bindings].map((b) => b.idle())).then(() => undefined);
  }

  /** Why this nexus's commands on the LU cannot run natively now, or null when they can (`rblkd ctl sessions`). */
  blocker(nexusKey: string): string | null {
    const { lu } = this;
    const r = lu.reservations;
    if (this.#holds > 0) return 'held for a command that needs the LU to itself, task management or a capacity change';
    if (!r.current) return 'the reservation state is being read again';
    if (r.reservation !== undefined || r.registrants.length > 0 || r.legacyHolder !== undefined) return 'a reservation or registration is in place';
    if (!(lu.portGroups?.mediaAccess ?? true)) return 'its target port group refuses media access';
    if (lu.attentions.pending(nexusKey).length > 0) return 'a unit attention is pending';
    return null;
  }

  #decide(b: FastPathBinding): void {
    if (this.blocker(b.nexusKey) === null) b.allow();
    else b.revoke();
  }
}
