// Target port groups (ALUA, SPC-4 5.15) as one gateway serves them. Each rblkd
// is one target port group with one target port: several gateways in front of
// one shared store (an RBD image, or one file) form one SCSI target device
// whose logical units have one identity (VPD 83h from the store), and each
// gateway reports its own group, its own access state, and the groups of its
// peers as the config names them (docs/operations.md "Several gateways").
// Implicit ALUA only (TPGS 01b): the state is the administrator's, changed by a
// config reload, never by SET TARGET PORT GROUPS.
import { ALUA_STANDBY, ALUA_UNAVAILABLE } from '../../protocol/scsi/sense-codes.js';
import type { AluaState } from '../../protocol/scsi/target-port-groups.js';
import { check, type Failure } from './outcome.js';

export interface PortGroup {
  /** TARGET PORT GROUP, 1..65535 (0 is reserved, SPC-4 7.8.6.7). */
  readonly group: number;
  readonly state: AluaState;
  /** RELATIVE TARGET PORT IDENTIFIER of the group's one port; the group number unless configured. */
  readonly relativePort: number;
}

export interface PortGroupsConfig {
  readonly local: PortGroup;
  readonly peers: readonly PortGroup[];
}

/**
 * Which commands a target port group in standby or unavailable state still
 * answers (SPC-4 5.15.2.4.4, 5.15.2.4.5), declared per command table entry
 * (command-spec.ts `alua`):
 * - 'unavailable': answered in every state (INQUIRY, REPORT LUNS, REQUEST
 *   SENSE, REPORT TARGET PORT GROUPS, REPORT SUPPORTED OPERATION CODES);
 * - 'standby': answered in standby, refused when unavailable (MODE SENSE and
 *   SELECT, PERSISTENT RESERVE IN and OUT);
 * - 'active' (the default): media access, answered only in an active state.
 */
export type AluaServed = 'active' | 'standby' | 'unavailable';

export class TargetPortGroups {
  #config: PortGroupsConfig;
  /** STATUS CODE 02h (altered by implicit ALUA behaviour) once a reload changed our state. */
  #altered = false;

  constructor(config: PortGroupsConfig) {
    this.#config = config;
  }

  get local(): PortGroup {
    return this.#config.local;
  }

  get peers(): readonly PortGroup[] {
    return this.#config.peers;
  }

  get altered(): boolean {
    return this.#altered;
  }

  /**
   * Applies a reloaded config. True when anything an initiator reads from
   * REPORT TARGET PORT GROUPS changed; the caller raises ASYMMETRIC ACCESS
   * STATE CHANGED (06 2A/06) on every logical unit (SPC-4 5.15.2.5).
   */
  update(next: PortGroupsConfig): boolean {
    const changed = JSON.stringify(next) !== JSON.stringify(this.#config);
    if (next.local.state !== this.#config.local.state) this.#altered = true;
    this.#config = next;
    return changed;
  }

  /** Whether READ and WRITE may reach the medium through this group (the fast path asks). */
  get mediaAccess(): boolean {
    const s = this.#config.local.state;
    return s === 'active-optimized' || s === 'active-non-optimized';
  }

  /** The NOT READY answer for a command this group's state does not serve, or undefined. */
  refusal(served: AluaServed | undefined): Failure | undefined {
    const s = this.#config.local.state;
    if (s === 'active-optimized' || s === 'active-non-optimized') return undefined;
    if (served === 'unavailable') return undefined;
    if (s === 'standby') return served === 'standby' ? undefined : check(ALUA_STANDBY);
    return check(ALUA_UNAVAILABLE);
  }
}
