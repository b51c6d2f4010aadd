// Asymmetric logical unit access (ALUA, SPC-4 5.15): the access states a
// target port group can be in, and the REPORT TARGET PORT GROUPS parameter
// data (SPC-4 6.36.2) that carries them. Shared by the target, which builds
// the data (target/scsi/commands/report-target-port-groups.ts), and the initiator,
// which chooses its path by it (initiator/paths.ts).

/** The states rblk serves, by their config names (docs/operations.md "Several gateways"). */
export const ALUA_STATES = ['active-optimized', 'active-non-optimized', 'standby', 'unavailable'] as const;
export type AluaState = (typeof ALUA_STATES)[number];

/** ASYMMETRIC ACCESS STATE codes (SPC-4 table 167). */
export const AluaStateCode = {
  ACTIVE_OPTIMIZED: 0x0,
  ACTIVE_NON_OPTIMIZED: 0x1,
  STANDBY: 0x2,
  UNAVAILABLE: 0x3,
  OFFLINE: 0xe,
  TRANSITIONING: 0xf,
} as const;

const CODE_OF: Readonly<Record<AluaState, number>> = {
  'active-optimized': AluaStateCode.ACTIVE_OPTIMIZED,
  'active-non-optimized': AluaStateCode.ACTIVE_NON_OPTIMIZED,
  standby: AluaStateCode.STANDBY,
  unavailable: AluaStateCode.UNAVAILABLE,
};

export function aluaStateCode(s: AluaState): number {
  return CODE_OF[s];
}

/** The name of a state code; offline and transitioning, which rblk never reports, read as 'unavailable'. */
export function aluaStateName(code: number): AluaState {
  switch (code) {
    case AluaStateCode.ACTIVE_OPTIMIZED:
      return 'active-optimized';
    case AluaStateCode.ACTIVE_NON_OPTIMIZED:
      return 'active-non-optimized';
    case AluaStateCode.STANDBY:
      return 'standby';
    default:
      return 'unavailable';
  }
}

/** One target port group descriptor (SPC-4 table 168). */
export interface TargetPortGroupDescriptor {
  preferred: boolean;
  state: number;
  /** The supported-state bits of byte 1 (T_SUP ... AO_SUP). */
  supported: number;
  group: number;
  /** STATUS CODE: 0 none, 1 altered by SET TARGET PORT GROUPS, 2 altered by implicit ALUA behaviour. */
  statusCode: number;
  relativePorts: number[];
}

/** Parses REPORT TARGET PORT GROUPS data in either format (SPC-4 tables 165, 166); throws RangeError on a short or broken list. */
export function parseTargetPortGroups(b: Buffer): TargetPortGroupDescriptor[] {
  if (b.length < 4) throw new RangeError(`REPORT TARGET PORT GROUPS data is ${b.length} bytes; the header alone is 4`);
  const end = Math.min(b.length, 4 + b.readUInt32BE(0));
  // Extended header: FORMAT TYPE 001b in byte 4 bits 6:4, and 8 header bytes.
  let at = b.length >= 8 && ((b[4] >> 4) & 0x7) === 1 ? 8 : 4;
  const out: TargetPortGroupDescriptor[] = [];
  while (at + 8 <= end) {
    const count = b[at + 7];
    if (at + 8 + 4 * count > end) throw new RangeError(`target port group descriptor at ${at} runs past the data`);
    const relativePorts: number[] = [];
    for (let i = 0; i < count; i++) relativePorts.push(b.readUInt16BE(at + 8 + 4 * i + 2));
    out.push({
      preferred: (b[at] & 0x80) !== 0,
      state: b[at] & 0x0f,
      supported: b[at + 1],
      group: b.readUInt16BE(at + 2),
      statusCode: b[at + 5],
      relativePorts,
    });
    at += 8 + 4 * count;
  }
  return out;
}
