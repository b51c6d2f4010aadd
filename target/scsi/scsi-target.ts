// The SCSI target as the daemon and the front ends see it: the set of
// logical units, logins and logouts (which establish and drop unit attention
// state), and the events the daemon raises. Commands run through the request
// core (request/request.ts).
import type { LogicalUnit } from './logical-unit.js';
import { nexusKey, type Nexus } from './nexus.js';

export class ScsiTarget {
  readonly #units = new Set<LogicalUnit>();
  readonly #nexuses = new Map<string, Nexus>();

  get units(): readonly LogicalUnit[] {
    return [...this.#units];
  }

  /** A new LU: logged-in nexuses see 29/00 on their first command to it. */
  addUnit(lu: LogicalUnit): void {
    this.#units.add(lu);
    for (const n of this.#nexuses.values()) lu.attach(n);
  }

  removeUnit(lu: LogicalUnit): void {
    this.#units.delete(lu);
  }

  /** A session logged in: POWER ON, RESET (29/00) is pending on every LU for it. */
  login(n: Nexus): void {
    this.#nexuses.set(n.sessionId, n);
    for (const lu of this.#units) lu.attach(n);
  }

  /**
   * I_T nexus loss: its unit attentions and any RESERVE(6) go; PR registrations stay (SPC-5 5.14.4).
   * Not while another session of the same I_T nexus (the same initiator on the same port, nexusKey)
   * is logged in: a reconnect whose login is processed before the old connection's end is, or
   * another connection of a multi-connection session. That nexus is not lost, and what it has
   * seen and holds stays; otherwise the late end of the old connection would queue 29/00 again
   * for a nexus that had already reported it, and drop the RESERVE(6) it holds.
   */
  logout(n: Nexus): void {
    this.#nexuses.delete(n.sessionId);
    const key = nexusKey(n);
    for (const other of this.#nexuses.values()) if (nexusKey(other) === key) return;
    for (const lu of this.#units) lu.detach(n);
  }

  /** After a reload changed the LU set: 3F/0E on every LU for every nexus. */
  raiseInventoryChanged(): void {
    for (const lu of this.#units) lu.raiseInventoryChanged();
  }
}
