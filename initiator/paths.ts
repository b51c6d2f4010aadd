// Multipath (docs/initiator.md "Multipath"): one session, several gateways
// (target addresses) serving one volume. Each gateway is a Path holding its own
// connections (channels). A path carries I/O only once it is known to reach
// the same device as the others (VPD 83h, SPC-5 7.7.6: the same NAA designator
// at every LUN both show), and the path chosen is the best ALUA state
// (SPC-4 5.15: REPORT TARGET PORT GROUPS, the group this path's port is in),
// the first named among equals.
import { inquiry, reportTargetPortGroups } from '../protocol/scsi/cdb.js';
import { DesignatorType, parseDeviceIdentification, parseStandardInquiry, Association } from '../protocol/scsi/inquiry.js';
import { VpdPage } from '../protocol/scsi/opcodes.js';
import { aluaStateName, parseTargetPortGroups, type AluaState } from '../protocol/scsi/target-port-groups.js';
import type { Channel } from './channel.js';
import { listLuns } from './discovery.js';
import type { PathAddress } from './options.js';
import type { ScsiRequest, ScsiResponse } from './scsi-request.js';

/**
 * - `active`: carries the session's I/O.
 * - `ready`: up and verified, not chosen (a worse ALUA state, or later in the list).
 * - `checking`: up, its identity not verified yet (just logged in, or back after a loss).
 * - `down`: no connection up; reconnecting in the background.
 * - `rejected`: reaches another device than the session's; never used again.
 */
export type PathState = 'active' | 'ready' | 'checking' | 'down' | 'rejected';

/** One path as `session.paths` and the `path` event describe it. */
export interface PathInfo {
  index: number;
  address: string;
  port: number;
  state: PathState;
  /** The ALUA state of the path's target port group; `unknown` when the target has no ALUA (TPGS 00b) or it was not asked yet. */
  alua: AluaState | 'unknown';
  /** The target port group of the gateway, when it reports one. */
  group?: number;
  /** Why it is rejected or down. */
  reason?: string;
}

/** ALUA preference: optimized first; a target without ALUA between optimized and non-optimized, so list order decides among such paths. */
const RANK: Readonly<Record<AluaState | 'unknown', number>> = {
  'active-optimized': 0,
  unknown: 1,
  'active-non-optimized': 2,
  standby: 3,
  unavailable: 4,
};

export class Path {
  readonly channels: Channel[] = [];
  alua: AluaState | 'unknown' = 'unknown';
  group: number | undefined;
  verified = false;
  identity: PathIdentity | undefined;
  rejected: string | undefined;
  lastReason: string | undefined;
  /** The identity or ALUA check running, so that two are never run at once. */
  checking: Promise<void> | null = null;

  constructor(
    readonly index: number,
    readonly where: PathAddress,
  ) {}

  get up(): boolean {
    return this.channels.some((c) => c.isUp);
  }

  /** May carry I/O: up, same device, not rejected. */
  get usable(): boolean {
    return this.rejected === undefined && this.verified && this.up;
  }

  get rank(): number {
    return RANK[this.alua];
  }

  info(active: boolean): PathInfo {
    const state: PathState =
      this.rejected !== undefined ? 'rejected' : !this.up ? 'down' : !this.verified ? 'checking' : active ? 'active' : 'ready';
    const reason = this.rejected ?? (state === 'down' ? this.lastReason : undefined);
    return {
      index: this.index,
      address: this.where.address,
      port: this.where.port,
      state,
      alua: this.alua,
      ...(this.group !== undefined ? { group: this.group } : {}),
      ...(reason !== undefined ? { reason } : {}),
    };
  }
}

/** Runs one command on one path and resolves on GOOD only. */
export type PathRun = (req: ScsiRequest) => Promise<ScsiResponse>;

async function dataIn(run: PathRun, lun: number, cdb: Buffer, length: number, what: string): Promise<Buffer> {
  const into = Buffer.alloc(length);
  const r = await run({ lun, cdb, dataIn: { kind: 'bytes', into }, idempotent: true, what });
  return into.subarray(0, r.dataIn);
}

/** What a path shows: the NAA designator (hex) of each LUN, and the target port group of its port. */
export interface PathIdentity {
  luns: Map<number, string>;
  /** LUN → target port group designator (VPD 83h, association target port), when reported. */
  groups: Map<number, number>;
}

export async function identify(run: PathRun): Promise<PathIdentity> {
  const luns = new Map<number, string>();
  const groups = new Map<number, number>();
  for (const lun of await listLuns(run)) {
    const page = await dataIn(run, lun, inquiry(1024, VpdPage.DEVICE_IDENTIFICATION), 1024, `VPD 83h of LUN ${lun}`);
    const ds = parseDeviceIdentification(page);
    const naa = ds.find((d) => d.type === DesignatorType.NAA && d.association === Association.LOGICAL_UNIT);
    if (naa) luns.set(lun, naa.value.toString('hex'));
    const tpg = ds.find((d) => d.type === DesignatorType.TARGET_PORT_GROUP && d.association === Association.TARGET_PORT);
    if (tpg && tpg.value.length >= 4) groups.set(lun, tpg.value.readUInt16BE(2));
  }
  return { luns, groups };
}

/**
 * Why `other` is not the device `reference` is, or undefined when it is: at
 * least one LUN in common, and every LUN both show has one NAA designator.
 */
export function identityMismatch(reference: PathIdentity, other: PathIdentity): string | undefined {
  let common = 0;
  for (const [lun, naa] of other.luns) {
    const want = reference.luns.get(lun);
    if (want === undefined) continue;
    if (want !== naa) return `LUN ${lun} is naa.${naa}, not naa.${want}: another device`;
    common++;
  }
  return common === 0 ? 'it shows none of the session\'s logical units (by VPD 83h)' : undefined;
}

/**
 * The ALUA state of the path's port group on `lun`: INQUIRY TPGS, then
 * REPORT TARGET PORT GROUPS and the descriptor of the group VPD 83h names.
 * `unknown` when the target has no ALUA.
 */
export async function aluaOf(run: PathRun, lun: number, group: number | undefined): Promise<{ alua: AluaState | 'unknown'; group?: number }> {
  const std = parseStandardInquiry(await dataIn(run, lun, inquiry(96), 96, `INQUIRY of LUN ${lun}`));
  if (std.tpgs === 0 || group === undefined) return { alua: 'unknown' };
  const groups = parseTargetPortGroups(await dataIn(run, lun, reportTargetPortGroups(1024), 1024, `REPORT TARGET PORT GROUPS of LUN ${lun}`));
  const mine = groups.find((g) => g.group === group);
  return mine === undefined ? { alua: 'unknown', group } : { alua: aluaStateName(mine.state), group };
}
