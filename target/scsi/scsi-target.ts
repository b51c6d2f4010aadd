// The SCSI target as the daemon and the front ends see it: the set of
// logical units, logins and logouts (which establish and drop unit attention
// state), and the events the daemon raises. Commands run through the request
// core (request/request.ts).
import type { LogicalUnit } from './logical-unit.js';
import type { Nexus } from './nexus.js';

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

  /** I_T nexus loss: its unit attentions and any RESERVE(6) go; PR registrations stay (SPC-5 5.14.4). */
  logout(n: Nexus): void {
    this.#nexuses.delete(n.sessionId);
    for (const lu of this.#units) lu.detach(n);
  }

  /** After a reload changed the LU set: 3F/0E on every LU for every nexus. */
  raiseInventoryChanged(): void {
    for (const lu of this.#units) lu.raiseInventoryChanged();
  }
}
