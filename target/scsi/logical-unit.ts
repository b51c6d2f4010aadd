// A logical unit: one volume as the SCSI core sees it. It owns the state SBC
// and SPC attach to a logical unit (mode pages, reservations, unit attention
// queues, the COMPARE AND WRITE range lock) and reaches storage only through
// the Backend seam.
import { IoStats } from './request/io-stats.js';
import { VolumeQos } from './qos.js';
import type { Backend } from '../backend/backend.js';
import {
  ASYMMETRIC_ACCESS_STATE_CHANGED,
  CAPACITY_DATA_HAS_CHANGED,
  THIN_PROVISIONING_SOFT_THRESHOLD_REACHED,
  MODE_PARAMETERS_CHANGED,
  POWER_ON_RESET,
  REPORTED_LUNS_DATA_HAS_CHANGED,
} from '../../protocol/scsi/sense-codes.js';
import type { SenseFormat } from '../../protocol/scsi/sense.js';
import { silentLogger, type ScsiLogger } from './logger.js';
import type { ModeSettings } from './mode/mode-pages.js';
import { nexusKey, type Nexus } from './nexus.js';
import type { TargetPortGroups } from './port-groups.js';
import { FastPathGate } from './fast-path-gate.js';
import { holding, RangeLock } from './range-lock.js';
import type { ReservationStore } from './reservations/reservation-store.js';
import { CopyResults } from './commands/copy-results.js';
import { Reservations } from './reservations/reservations.js';
import { UnitAttentions } from './unit-attention.js';

/** Limits reported in the Block Limits VPD page (SBC-4 6.6.4), in logical blocks. */
export interface LuLimits {
  /** MAXIMUM TRANSFER LENGTH: READ/WRITE/VERIFY beyond it get 05 24/00. */
  readonly maxTransferBlocks: number;
  readonly optimalTransferBlocks: number;
  readonly maxUnmapLbaCount: number;
  readonly maxUnmapDescriptors: number;
  readonly unmapGranularity: number;
  readonly maxWriteSameBlocks: number;
  /** MAXIMUM COMPARE AND WRITE LENGTH, at most 255 (one CDB byte). */
  readonly maxCompareAndWriteBlocks: number;
}

/**
 * WRITE ATOMIC(16)'s limits (SBC-4 5.48, VPD B0h), in logical blocks: the
 * longest atomic write, and the multiple its LBA and its length must be.
 */
export interface AtomicLimits {
  readonly maxBlocks: number;
  readonly alignment: number;
  readonly granularity: number;
}

export interface LogicalUnitOptions {
  readonly name: string;
  readonly backend: Backend;
  /** 16 bytes (a UUID, as a Buffer or in text form) that names this volume forever. */
  readonly identifier: Buffer | string;
  readonly blockSize?: 512 | 4096;
  /**
   * The physical block READ CAPACITY(16) reports (LOGICAL BLOCKS PER PHYSICAL
   * BLOCK EXPONENT, SBC-4 5.21.2), 512 or 4096 and at least blockSize; the unmap
   * and transfer granularities default to it. 4096 by default: the page and
   * filesystem block the backends work in.
   */
  readonly physicalBlockSize?: 512 | 4096;
  readonly readOnly?: boolean;
  /** Thin provisioning; only honoured when the backend can discard. Defaults to backend.canDiscard. */
  readonly thin?: boolean;
  /** VPD 80h; defaults to the identifier in hex. */
  readonly serial?: string;
  readonly vendor?: string;
  readonly product?: string;
  readonly revision?: string;
  /** IEEE company identifier for the NAA-6 designator (SPC-5 7.7.6.6.5). */
  readonly ieeeCompanyId?: number;
  readonly limits?: Partial<LuLimits>;
  /** Initial WCE (Caching page); true by default, because backends honour FUA and flush. */
  readonly writeCache?: boolean;
  /** Reported in VPD B1h; false means an SSD-like medium (rotation rate 1). */
  readonly rotational?: boolean;
  readonly log?: ScsiLogger;
  /** Where the persistent reservation state lives; in this process when absent (reservation-store.ts). */
  readonly reservationStore?: ReservationStore;
  /**
   * This gateway's target port group and its peers (ALUA, port-groups.ts),
   * shared by every LU of the gateway; absent, INQUIRY reports TPGS 00b.
   */
  readonly portGroups?: TargetPortGroups;
}

export const DEFAULT_VENDOR = 'RBLK';
export const DEFAULT_PRODUCT = 'rblk volume';
export const DEFAULT_REVISION = '0001';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

function defaultLimits(blockSize: number, physicalBlockSize: number): LuLimits {
  return {
    maxTransferBlocks: MiB / blockSize,
    optimalTransferBlocks: MiB / blockSize,
    // At most 2^20 blocks per UNMAP: libiscsi's Inquiry.BlockLimits calls more "insanely big".
    maxUnmapLbaCount: Math.min(GiB / blockSize, 1 << 20),
    maxUnmapDescriptors: 256,
    unmapGranularity: physicalBlockSize / blockSize,
    // Within WRITE SAME(10)'s 16-bit count, so both CDBs have the same limit, and a
    // zero-block WRITE SAME (to the end) is refused on media larger than that.
    maxWriteSameBlocks: 0xffff,
    maxCompareAndWriteBlocks: 1,
  };
}

function checkLimits(l: LuLimits): void {
  for (const [name, v] of Object.entries(l)) {
    if (!Number.isInteger(v) || v < 1 || v > 0xffffffff) throw new RangeError(`limit ${name} ${v} is not in 1..2^32-1`);
  }
  if (l.maxCompareAndWriteBlocks > 255) throw new RangeError('maxCompareAndWriteBlocks is at most 255');
  if (2 * l.maxCompareAndWriteBlocks > l.maxTransferBlocks) {
    throw new RangeError('COMPARE AND WRITE moves 2 x maxCompareAndWriteBlocks; that must fit maxTransferBlocks');
  }
}

export function parseIdentifier(id: Buffer | string): Buffer {
  if (Buffer.isBuffer(id)) {
    if (id.length !== 16) throw new RangeError(`identifier is ${id.length} bytes; it must be 16`);
    return Buffer.from(id);
  }
  const hex = id.replace(/-/g, '');
  if (!/^[0-9a-fA-F]{32}$/.test(hex)) throw new RangeError(`identifier "${id}" is not 32 hex digits (a UUID)`);
  return Buffer.from(hex, 'hex');
}

/**
 * NAA 6 (IEEE Registered Extended, SPC-5 7.7.6.6.5): 4 bits NAA, 24 bits
 * company id, 100 bits vendor specific. The 100 bits are the low 100 bits of
 * the 128-bit identifier, so the designator never changes for a volume.
 */
export function naa6(identifier: Buffer, companyId: number): Buffer {
  const id = identifier.readBigUInt64BE(0) * 2n ** 64n + identifier.readBigUInt64BE(8);
  const v = (6n << 124n) | (BigInt(companyId & 0xffffff) << 100n) | (id & ((1n << 100n) - 1n));
  const out = Buffer.alloc(16);
  out.writeBigUInt64BE(v >> 64n, 0);
  out.writeBigUInt64BE(v & 0xffffffffffffffffn, 8);
  return out;
}

export class LogicalUnit {
  readonly name: string;
  readonly backend: Backend;
  readonly blockSize: number;
  /** A multiple of blockSize (LogicalUnitOptions.physicalBlockSize). */
  readonly physicalBlockSize: number;
  readonly readOnly: boolean;
  readonly thin: boolean;
  readonly identifier: Buffer;
  readonly naa: Buffer;
  readonly serial: string;
  readonly vendor: string;
  readonly product: string;
  readonly revision: string;
  readonly rotational: boolean;
  readonly limits: LuLimits;
  /** Null when the backend cannot write atomically for all its clients (backend.ts atomicWrites). */
  readonly atomic: AtomicLimits | null;
  readonly log: ScsiLogger;
  readonly portGroups: TargetPortGroups | undefined;
  readonly attentions = new UnitAttentions();
  readonly reservations: Reservations;
  readonly rangeLock = new RangeLock();
  /** EXTENDED COPY outcomes held for RECEIVE COPY RESULTS (extended-copy.ts). */
  readonly copyResults = new CopyResults();
  /** Who may run READ and WRITE on the native fast path, and how it is taken away (fast-path-gate.ts). */
  readonly fastPath: FastPathGate = new FastPathGate(this);
  /** Commands, bytes, errors and latency by class, counted by the request core (request/io-stats.ts). */
  readonly stats = new IoStats();
  /** IOPS and bandwidth limits, charged by every path that runs a READ or WRITE (qos.ts; docs/operations.md "QoS limits"). */
  readonly qos = new VolumeQos();
  readonly defaultModes: ModeSettings;
  #modes: ModeSettings;
  #lastBlocks: number;

  /**
   * A connection that used this LU is gone, and commands of it may still be
   * inside the backend (a stalled device, a cluster that does not answer):
   * each range they hold fences later commands on those blocks, from any
   * connection, until it is released, and nothing more of `owner` starts
   * (range-lock.ts, docs/target.md "A lost connection's commands"). Returns
   * how many ranges were fenced.
   */
  fenceLost(owner: Nexus): number {
    return this.rangeLock.fence(owner);
  }

  /**
   * The same for I/O that runs natively, whose blocks JavaScript does not know
   * (the fast path's librbd requests of a lost connection): every later
   * command on this LU waits until `settled`, those in JavaScript at the range
   * lock and those of the fast path by the gate, which sends them to
   * JavaScript meanwhile. `settled` must not reject.
   */
  fenceUntil(settled: Promise<void>): void {
    // Queued now, before anything else can be: later commands line up behind it.
    const barrier = this.rangeLock.acquire(undefined, 0, Number.MAX_SAFE_INTEGER, true);
    this.fastPath.hold(() => holding(barrier, () => settled)).catch((e: unknown) => this.log.warn('fence of a lost connection failed', { lu: this.name, error: String(e) }));
  }

  /**
   * FENCE GATEWAY (docs/protocol.md §14.1, docs/target.md "Another gateway's
   * commands"): an initiator lost commands on the gateway of target port group
   * `group` and is about to reissue them here. That gateway may be frozen or
   * cut off with them still in hand, so it is fenced out of the store first,
   * through the store (an RBD image: the Ceph blocklist). Only a peer group
   * this gateway's config names may be fenced. Resolves what was done, for
   * the log; a refusal is `ok: false`.
   */
  async fenceGateway(group: number): Promise<{ readonly ok: boolean; readonly what: string }> {
    const groups = this.portGroups;
    if (groups === undefined) return { ok: false, what: 'this gateway has no alua section: it knows no other gateway' };
    if (group === groups.local.group) return { ok: true, what: `group ${group} is this gateway's own: nothing to fence` };
    if (!groups.peers.some((p) => p.group === group)) return { ok: false, what: `group ${group} is not a peer group in this gateway's alua section` };
    if (this.backend.fenceGateway === undefined) return { ok: true, what: `the volume's store is not shared through a cluster: nothing to fence` };
    try {
      const r = await this.backend.fenceGateway(group);
      if (r.kind === 'fenced') return { ok: true, what: `the gateway of group ${group} (client ${r.address}) is fenced out of the store` };
      if (r.kind === 'self') return { ok: true, what: `group ${group} published this gateway's own client: nothing to fence` };
      return { ok: true, what: `no gateway of group ${group} ever published its client for this volume: nothing to fence` };
    } catch (e) {
      return { ok: false, what: `the fence of group ${group} failed: ${e instanceof Error ? e.message : String(e)}` };
    }
  }

  constructor(o: LogicalUnitOptions) {
    const blockSize = o.blockSize ?? 512;
    if (blockSize !== 512 && blockSize !== 4096) throw new RangeError(`block size ${String(blockSize)} is not 512 or 4096`);
    this.name = o.name;
    this.backend = o.backend;
    this.blockSize = blockSize;
    const physical = o.physicalBlockSize ?? 4096;
    if ((physical !== 512 && physical !== 4096) || physical < blockSize) throw new RangeError(`physical block size ${String(physical)} is not 512 or 4096 and at least the block size ${blockSize}`);
    this.physicalBlockSize = physical;
    this.readOnly = (o.readOnly ?? false) || o.backend.readOnly;
    this.thin = (o.thin ?? o.backend.canDiscard) && o.backend.canDiscard;
    this.identifier = parseIdentifier(o.identifier);
    this.naa = naa6(this.identifier, o.ieeeCompanyId ?? 0);
    this.serial = o.serial ?? this.identifier.toString('hex');
    this.vendor = o.vendor ?? DEFAULT_VENDOR;
    this.product = o.product ?? DEFAULT_PRODUCT;
    this.revision = o.revision ?? DEFAULT_REVISION;
    this.rotational = o.rotational ?? false;
    this.limits = { ...defaultLimits(blockSize, physical), ...o.limits };
    checkLimits(this.limits);
    // One backend write of up to MAXIMUM TRANSFER LENGTH, in whole physical blocks, so that
    // it never tears a physical block another command could be writing (write-atomic.ts).
    const perPhysical = physical / blockSize;
    this.atomic =
      o.backend.atomicWrites === false
        ? null
        : { maxBlocks: Math.floor(this.limits.maxTransferBlocks / perPhysical) * perPhysical, alignment: perPhysical, granularity: perPhysical };
    this.log = o.log ?? silentLogger;
    this.portGroups = o.portGroups;
    this.defaultModes = { wce: o.writeCache ?? true, dSense: false, swp: false };
    this.#modes = this.defaultModes;
    this.reservations = new Reservations((key, code) => this.attentions.establish(key, code), o.reservationStore);
    // A reservation taken or dropped (here or through another gateway) changes who may take the fast path.
    this.reservations.onChange = () => this.fastPath.refresh();
    this.#lastBlocks = this.blocks;
    // A unit attention raised or consumed changes which nexus may take the fast path.
    this.attentions.onChange = () => this.fastPath.refresh();
    // The backend's own fast-path target changed (rbd: fenced, or served again through a new client).
    o.backend.onFastPathChange?.(() => this.fastPath.refresh());
  }

  /** Capacity in logical blocks; a partial trailing block is not addressable. */
  get blocks(): number {
    return Math.floor(this.backend.size / this.blockSize);
  }

  get modes(): ModeSettings {
    return this.#modes;
  }

  get senseFormat(): SenseFormat {
    return this.#modes.dSense ? 'descriptor' : 'fixed';
  }

  /** MODE SELECT applied; the other nexuses hear 2A/01 (SPC-5 7.5.1). */
  setModes(next: ModeSettings, by: Nexus): void {
    if (next.wce === this.#modes.wce && next.dSense === this.#modes.dSense && next.swp === this.#modes.swp) return;
    this.#modes = next;
    this.attentions.establishAll(MODE_PARAMETERS_CHANGED, nexusKey(by));
  }

  /** A nexus logged in: its next command here reports 29/00. */
  attach(n: Nexus): void {
    this.attentions.reset(nexusKey(n));
  }

  /** I_T nexus loss: pending conditions go, and so does a RESERVE(6) (SPC-2 5.5.1). */
  detach(n: Nexus): void {
    const key = nexusKey(n);
    this.attentions.forget(key);
    this.copyResults.forget(key);
    this.reservations.dropLegacy(key);
    this.fastPath.refresh();
  }

  /**
   * LOGICAL UNIT RESET (SAM-5 6.3.3, 6.4): a unit attention for the initiator
   * port of every I_T nexus, the issuer's included (libiscsi MultipathIO.Reset
   * waits for it on each path, Linux LIO does the same); RESERVE(6) ends.
   */
  reset(): void {
    this.attentions.establishAll(POWER_ON_RESET);
    this.reservations.dropLegacy();
    this.fastPath.refresh();
  }

  raiseCapacityChanged(): void {
    this.#lastBlocks = this.blocks;
    this.attentions.establishAll(CAPACITY_DATA_HAS_CHANGED);
  }

  /**
   * The target port groups changed (a reload, port-groups.ts): every nexus
   * hears ASYMMETRIC ACCESS STATE CHANGED (SPC-4 5.15.2.5), and the fast path
   * re-decides, since standby and unavailable refuse READ and WRITE.
   */
  raiseAccessStateChanged(): void {
    this.attentions.establishAll(ASYMMETRIC_ACCESS_STATE_CHANGED);
    this.fastPath.refresh();
  }

  /** Above a space threshold of its volume (target/daemon/space-watch.ts); NVMe reports it as a SMART/Health warning. */
  spaceLow = false;

  /**
   * The volume crossed a space threshold (docs/operations.md "Space thresholds"): on the way up
   * every nexus hears THIN PROVISIONING SOFT THRESHOLD REACHED (38/07, SBC-4 4.7.3.7.3), once
   * per crossing; on the way down nothing is said.
   */
  setSpaceLow(low: boolean): void {
    if (low && !this.spaceLow) this.attentions.establishAll(THIN_PROVISIONING_SOFT_THRESHOLD_REACHED);
    this.spaceLow = low;
  }

  raiseInventoryChanged(): void {
    this.attentions.establishAll(REPORTED_LUNS_DATA_HAS_CHANGED);
  }

  /**
   * Re-reads the backend size; raises 2A/09 when the block count changed.
   * The backend's `size` must report the refreshed value afterwards, since
   * every command reads capacity from it.
   */
  async refreshCapacity(): Promise<boolean> {
    // Held: no fast-path command may run against a capacity about to change.
    return this.fastPath.hold(async () => {
      const size = await this.backend.refreshSize();
      if (Math.floor(size / this.blockSize) === this.#lastBlocks) return false;
      this.raiseCapacityChanged();
      return true;
    });
  }
}
