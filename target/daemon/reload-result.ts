// What a reload did and why it was refused, as `rblkd ctl reload` prints it
// (docs/operations.md "Reloading", "Removing a volume in use").

/** What a reload did, for `rblkd ctl reload` (docs/operations.md "Reloading"). */
export interface ReloadResult {
  applied: boolean;
  added: string[];
  removed: string[];
  /** Kept volumes whose ACL, QoS limits or size changed. */
  changed: string[];
  resized: string[];
  listenersAdded: string[];
  listenersRemoved: string[];
  /** Why it was refused, or what failed while applying it (a listener that did not bind). */
  errors: string[];
  /**
   * Removed volumes that logged-in sessions could see: why a reload without force was refused,
   * or what a forced one removed under them (docs/operations.md "Removing a volume in use").
   */
  inUse: VolumeInUse[];
}

/** A volume a reload removes, and the sessions that may be using it. */
export interface VolumeInUse {
  volume: string;
  lun: number;
  sessions: { id: string; initiator: string | null; peer: string }[];
}

/** One volume in use, and by which sessions. */
export function inUseWho(u: VolumeInUse): string {
  const who = u.sessions.map((s) => `${s.id} (${s.initiator ?? 'not logged in'} from ${s.peer})`).join(', ');
  return `volume ${u.volume} (LUN ${u.lun}) is in use by ${plural(u.sessions.length, 'session')}: ${who}`;
}

/** The second way on, in a refusal: `rblkd ctl delete` puts its file back, and names itself instead. */
export const FORCE_RELOAD = 'rblkd ctl reload --force';

/** The refusal line of one volume in use: which sessions, and the two ways on. */
export function inUseText(u: VolumeInUse): string {
  return (
    `${inUseWho(u)}; log them out first (rblkd ctl kick ID, or on the initiator), ` +
    `or run ${FORCE_RELOAD} to remove it under them (their commands to LUN ${u.lun} then fail with LOGICAL UNIT NOT SUPPORTED)`
  );
}

export function emptyResult(applied: boolean, errors: string[] = []): ReloadResult {
  return { applied, added: [], removed: [], changed: [], resized: [], listenersAdded: [], listenersRemoved: [], errors, inUse: [] };
}

export function plural(n: number, what: string): string {
  return `${n} ${what}${n === 1 ? '' : 's'}`;
}
