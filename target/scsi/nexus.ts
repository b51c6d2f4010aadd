// The I_T nexus (SAM-5 4.6.4): who is talking to the target, and through which
// port. Persistent reservations and unit attentions belong to the nexus
// identity (initiator and target port), not to a session, so that a
// reconnecting initiator finds its registrations again, as SRP's initiator
// port identifier intends (SRP r16a 5.4: several channels, one I_T nexus).

export interface Nexus {
  /** The front end's session; used in logs only. */
  readonly sessionId: string;
  /** The initiator's name from login (the initiator port). */
  readonly initiator: string;
  /**
   * The initiator device's name, where `initiator` names one of its ports: iSCSI's
   * port name is the IQN plus `,i,0x<ISID>` (RFC 7143 §10.12.2, SAM-5's port
   * identifier), and a host opens a session per ISID. Absent: the same as `initiator`.
   */
  readonly device?: string;
  /** The target port the session came in on; absent when the target has one. */
  readonly targetPort?: string;
}

/** What a nexus may do to one logical unit (set by LUN masking in the config). */
export type Access = 'rw' | 'ro';

/**
 * The initiator by name, as a configuration names it (QoS `initiators:`, docs/operations.md
 * "QoS limits"): the device, whichever of its ports a session came from.
 */
export function initiatorNameOf(n: Nexus): string {
  return n.device ?? n.initiator;
}

export function nexusKey(n: Nexus): string {
  return n.targetPort === undefined ? n.initiator : `${n.initiator}\u0000${n.targetPort}`;
}
