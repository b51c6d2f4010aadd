// A configured volume, served: its backend (opened by its kind, target/backend/registry.ts), its logical unit
// with the identity that must survive restarts (config/identity.ts; SPC-5
// 7.7.6, VPD 83h), its ACL (config/acl.ts), its QoS limits (target/scsi/qos.ts) and
// its space thresholds (space-watch.ts). The ACL, the QoS limits, the space thresholds
// and the size are the only parts a reload may change on a live volume; the rest is
// fixed at open.
import { SpaceWatch, type SpaceInfo } from './space-watch.js';
import { mkdir } from 'node:fs/promises';
import { accessFor } from '../../config/acl.js';
import { readOnlyMissing } from '../../config/backing.js';
import { volumeIdentity } from '../../config/identity.js';
import { formatSize } from '../../config/size.js';
import type { VolumeConfig } from '../../config/schema.js';
import type { Backend } from '../backend/backend.js';
import { kindOf, openVolumeBackend } from '../backend/registry.js';
import { RateMeter } from './volume-rates.js';
import { LogicalUnit, SharedReservationStore, type Access, type TargetPortGroups } from '../scsi/index.js';
import type { ExportedVolume } from '../server.js';
import { STATE_DIR_HINT } from '../../config/state-dir.js';
import { asConfigRefusal, ConfigRefusal } from './config-refusal.js';
import { errorText } from '../error-text.js';
import { type DaemonLogger } from './logger.js';

export interface VolumeContext {
  /** Where generated identities are kept (state_dir). */
  stateDir: string;
  /** limits.max_io: the Block Limits page's MAXIMUM TRANSFER LENGTH follows it (SBC-4 6.6.4). */
  maxIo: number;
  log: DaemonLogger;
  /** The gateway's target port groups (ALUA, target/scsi/port-groups.ts), when configured. */
  portGroups?: TargetPortGroups | undefined;
}

/**
 * state_dir, or an error that says which key to change: its default, /var/lib/rblk, is the
 * unit's StateDirectory and not writable by a user who starts rblkd by hand
 * (docs/operations.md "Troubleshooting"); Node's own error names only the path.
 */
export async function makeStateDir(dir: string): Promise<void> {
  try {
    await mkdir(dir, { recursive: true, mode: 0o755 });
  } catch (e) {
    const c = e as NodeJS.ErrnoException;
    const error = Object.assign(new Error(`cannot create state_dir ${dir}: ${errorText(e)} ${STATE_DIR_HINT}`, { cause: e }), { code: c.code });
    throw c.code === undefined ? error : new ConfigRefusal(error.message, c.code, { cause: e });
  }
}

function configuredSize(v: VolumeConfig): number | undefined {
  return kindOf(v.backing).configuredSize(v.backing);
}

export class ServedVolume implements ExportedVolume {
  readonly name: string;
  readonly lun: number;
  readonly nsid: number | undefined;
  readonly lu: LogicalUnit;
  /** The current rates `rblkd ctl volumes` shows (volume-rates.ts). */
  readonly rates: RateMeter;
  #config: VolumeConfig;
  #space: SpaceWatch | null = null;

  private constructor(config: VolumeConfig, lu: LogicalUnit) {
    this.name = config.name;
    this.lun = config.lun;
    this.nsid = config.nsid;
    this.lu = lu;
    this.rates = new RateMeter(lu.stats);
    this.#config = config;
  }

  /** Opens the backing store and builds the logical unit; nothing is left open on failure. */
  static async open(config: VolumeConfig, ctx: VolumeContext): Promise<ServedVolume> {
    const size = configuredSize(config);
    // Relative backing files are created in the state directory, before the identity is written there.
    await makeStateDir(ctx.stateDir);
    ctx.log.debug(
      `volume ${config.name}: opening its ${config.backing.kind} backing (${size !== undefined ? formatSize(size) : 'size of the store'}, io_engine ${config.ioEngine}${config.direct ? ', O_DIRECT' : ''}${config.readOnly ? ', read-only' : ''})`,
      // Every volume line carries volume and lun (docs/operations.md "Logs and the journal").
      { volume: config.name, lun: config.lun },
    );
    let backend: Backend;
    try {
      backend = await openVolumeBackend(config.backing, {
        name: config.name,
        readOnly: config.readOnly,
        direct: config.direct,
        ioEngine: config.ioEngine,
        logicalBlockSize: config.blockSize,
        // Gateways of one store (alua) share it on purpose; any other file or device is locked (docs/backends.md "One daemon per store").
        sharedStore: ctx.portGroups !== undefined,
      });
    } catch (e) {
      // A file gone since the config was checked, a sandbox that makes its directory read-only.
      if (config.readOnly && 'path' in config.backing && (e as NodeJS.ErrnoException).code === 'ENOENT') {
        throw new ConfigRefusal(`volume ${config.name}: ${readOnlyMissing(config.backing.path)}`, 'ENOENT', { cause: e });
      }
      throw asConfigRefusal(`volume ${config.name}: cannot open ${kindOf(config.backing).where(config.backing)}${config.readOnly ? ' (read_only)' : ''}`, e);
    }
    try {
      // Gateways of one shared store report one device (VPD 83h from the store, not the host).
      const identity = await volumeIdentity(ctx.stateDir, config, backend.sharedIdentity);
      // A store shared between gateways keeps the persistent reservations too, so
      // that one taken through any gateway binds them all (docs/architecture.md "Reservation stores").
      const record = backend.openSharedRecord === undefined ? undefined : await backend.openSharedRecord('pr');
      const reservationStore = record === undefined ? undefined : await SharedReservationStore.open(record, ctx.log);
      // So that a peer gateway can fence this one for an initiator that fails over (docs/backends.md "Fencing another gateway").
      if (ctx.portGroups !== undefined && backend.publishGateway !== undefined) {
        const group = ctx.portGroups.local.group;
        const address = await backend.publishGateway(group);
        ctx.log.debug(`volume ${config.name}: published client ${address} as the gateway of target port group ${group}`, { volume: config.name, lun: config.lun });
      }
      const lu = new LogicalUnit({
        name: config.name,
        backend,
        identifier: identity.uuid,
        serial: identity.serial,
        blockSize: config.blockSize,
        // 4096 unless configured (logical-unit.ts physicalBlockSize).
        physicalBlockSize: config.physicalBlockSize ?? 4096,
        readOnly: config.readOnly,
        thin: config.thin,
        // COMPARE AND WRITE moves two blocks, so two is the floor whatever max_io says.
        limits: { maxTransferBlocks: Math.max(2, Math.floor(ctx.maxIo / config.blockSize)) },
        log: ctx.log,
        ...(reservationStore === undefined ? {} : { reservationStore }),
        ...(ctx.portGroups ? { portGroups: ctx.portGroups } : {}),
      });
      const b = backend as Backend & { ioEngine?: string; ioEngineFallback?: string | null };
      ctx.log.debug(`volume ${config.name}: backend open, ${formatSize(backend.size)}${b.ioEngine !== undefined ? `, engine ${b.ioEngine}` : ''}${b.ioEngineFallback ? ` (io_uring unavailable: ${b.ioEngineFallback})` : ''}, identity ${identity.uuid}`, {
        volume: config.name,
        lun: config.lun,
      });
      lu.qos.configure(config.qos ?? null);
      const served = new ServedVolume(config, lu);
      // Space thresholds for a file on a filesystem (space-watch.ts); a device or a cluster has its own.
      if (config.backing.kind === 'file') {
        served.#space = new SpaceWatch({ volume: config.name, lun: config.lun, path: config.backing.path, lu, log: ctx.log }, config.spaceThreshold ?? {});
        served.#space.start();
      }
      backend.onNotice?.((n) => ctx.log[n.level](`volume ${config.name}: ${n.message}`, { volume: config.name, lun: config.lun }));
      // A store resized outside rblkd (rbd resize on any host): CAPACITY DATA HAS CHANGED.
      backend.onResize?.(() => {
        const from = backend.size;
        served.lu.refreshCapacity().then(
          (changed) => {
            if (changed) ctx.log.info(`volume ${config.name}: capacity changed from ${formatSize(from)} to ${formatSize(backend.size)}`, { volume: config.name, lun: config.lun });
          },
          (e: unknown) => ctx.log.warn(`volume ${config.name}: re-reading the capacity failed: ${e instanceof Error ? e.message : String(e)}`, { volume: config.name, lun: config.lun }),
        );
      });
      return served;
    } catch (e) {
      await backend.close();
      throw e;
    }
  }

  get config(): VolumeConfig {
    return this.#config;
  }

  get backend(): Backend {
    return this.lu.backend;
  }

  /** LUN masking (docs/operations.md "ACLs"): null hides the volume from this initiator. */
  access(initiator: string): Access | null {
    return accessFor(this.#config, initiator) ?? null;
  }

  /**
   * A reload kept this volume: the new ACL applies from the next LUN map
   * computed for a session (a login, or an inventory change), new QoS limits
   * from the next command of every session. The caller has
   * checked that nothing fixed changed (reload-plan.ts).
   */
  reconfigure(next: VolumeConfig): void {
    this.#config = next;
    // In place: sessions and their fast paths hold the buckets, not copies (target/scsi/qos.ts).
    this.lu.qos.configure(next.qos ?? null);
    this.#space?.setThresholds(next.spaceThreshold ?? {});
  }

  /** The space thresholds' last reading (space-watch.ts), for a file volume. */
  get space(): SpaceInfo | null {
    return this.#space?.info ?? null;
  }

  /**
   * Grows the backing store to a larger configured size (never shrinking it),
   * then re-reads the capacity, which raises CAPACITY DATA HAS CHANGED (2A/09,
   * SBC-4 4.10) when the block count moved, whether the config or the device
   * grew it. Returns the old and new size in bytes when the capacity changed.
   */
  async grow(): Promise<{ from: number; to: number } | null> {
    const from = this.backend.size;
    const want = configuredSize(this.#config);
    const kind = kindOf(this.#config.backing);
    if (want !== undefined && want > from && kind.grow !== undefined) await kind.grow(this.#config.backing, this.backend, want);
    const changed = await this.lu.refreshCapacity();
    return changed ? { from, to: this.backend.size } : null;
  }

  /** Makes every acknowledged write durable, then closes; the error, if the flush or the close failed. */
  async close(): Promise<Error | null> {
    this.#space?.stop();
    this.backend.onResize?.(null);
    this.lu.qos.close();
    await this.lu.reservations.store.close();
    let failure: Error | null = null;
    if (!this.backend.readOnly) {
      try {
        await this.backend.flush();
      } catch (e) {
        failure = e instanceof Error ? e : new Error(String(e));
      }
    }
    try {
      await this.backend.close();
    } catch (e) {
      failure ??= e instanceof Error ? e : new Error(String(e));
    }
    return failure;
  }

  describe(): string {
    const where = kindOf(this.#config.backing).where(this.#config.backing);
    const b = this.backend as Backend & { ioEngine?: string; ioEngineFallback?: string | null };
    const engine = b.ioEngine === undefined ? '' : `, io ${b.ioEngine}${b.ioEngineFallback ? ` (io_uring unavailable: ${b.ioEngineFallback})` : ''}`;
    // What initiators see: whole blocks. A file whose size is not a multiple of the block size keeps its tail unserved.
    const served = this.lu.blocks * this.lu.blockSize;
    const tail = this.backend.size > served ? `; the last ${this.backend.size - served} bytes of ${formatSize(this.backend.size)}, less than a block, are not served` : '';
    return `${this.name} (LUN ${this.lun}, ${formatSize(served)}${tail}, ${where}${engine})`;
  }
}
