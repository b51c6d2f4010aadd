// Space thresholds of a file volume (docs/operations.md "Space thresholds"): every few seconds
// the file's allocated blocks and its filesystem's free space are read (fstat, statfs), and
// crossing a threshold is said before writes start failing with NO SPACE: a warning in the log,
// `rblkd ctl volumes` and the metrics, THIN PROVISIONING SOFT THRESHOLD REACHED (38/07) for every
// SCSI nexus, and NVMe's SMART/Health available-spare warning (logical-unit.ts setSpaceLow).
import { stat, statfs } from 'node:fs/promises';
import { errorText } from '../error-text.js';
import type { LogicalUnit } from '../scsi/index.js';
import type { DaemonLogger } from './logger.js';

/** How often the space is read; a statfs and an fstat per volume, so cheap. */
export const SPACE_CHECK_MS = 5_000;
/** The filesystem threshold when the volume sets none: percent used. */
export const DEFAULT_FILESYSTEM_THRESHOLD = 90;
/** Back under a threshold by this many points before a new crossing is reported again. */
const HYSTERESIS = 2;

export interface SpaceThresholds {
  filesystem?: number;
  allocated?: number;
}

/** What `rblkd ctl volumes` and the metrics show. */
export interface SpaceInfo {
  allocatedBytes: number;
  filesystemBytes: number;
  filesystemFreeBytes: number;
  /** Percent of the filesystem used, and of the volume's size allocated. */
  filesystemUsedPercent: number;
  allocatedPercent: number;
  thresholds: { filesystem: number; allocated: number | null };
  /** Over a threshold now; why, when it is. */
  low: boolean;
  why: string | null;
  /** Crossings so far (each raised 38/07 once). */
  crossings: number;
}

export class SpaceWatch {
  #timer: NodeJS.Timeout | null = null;
  #info: SpaceInfo | null = null;
  #crossings = 0;
  #checking: Promise<void> | null = null;

  constructor(
    private readonly o: { volume: string; lun: number; path: string; lu: LogicalUnit; log: DaemonLogger; intervalMs?: number },
    private thresholds: SpaceThresholds,
  ) {}

  start(): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => void this.check(), this.o.intervalMs ?? SPACE_CHECK_MS);
    this.#timer.unref();
    void this.check();
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }

  /** A reload's new thresholds, applied at the next check (which runs now). */
  setThresholds(t: SpaceThresholds): void {
    this.thresholds = t;
    void this.check();
  }

  get info(): SpaceInfo | null {
    return this.#info;
  }

  /** Reads the space once; never throws (a failed read is logged at debug and retried next time). */
  check(): Promise<void> {
    this.#checking ??= this.#check().finally(() => (this.#checking = null));
    return this.#checking;
  }

  async #check(): Promise<void> {
    const meta = { volume: this.o.volume, lun: this.o.lun };
    let fs: Awaited<ReturnType<typeof statfs>>;
    let st: Awaited<ReturnType<typeof stat>>;
    try {
      [fs, st] = await Promise.all([statfs(this.o.path), stat(this.o.path)]);
    } catch (e) {
      this.o.log.debug(`volume ${this.o.volume}: cannot read its space: ${errorText(e)}`, meta);
      return;
    }
    const fsTotal = Number(fs.blocks) * Number(fs.bsize);
    const fsFree = Number(fs.bavail) * Number(fs.bsize);
    const allocated = Number(st.blocks) * 512;
    const size = this.o.lu.backend.size;
    const fsUsed = fsTotal > 0 ? (100 * (fsTotal - fsFree)) / fsTotal : 0;
    const allocatedPct = size > 0 ? (100 * allocated) / size : 0;
    const fsLimit = this.thresholds.filesystem ?? DEFAULT_FILESYSTEM_THRESHOLD;
    const allocLimit = this.thresholds.allocated ?? null;
    const wasLow = this.#info?.low ?? false;
    // Over a threshold; once over, low until back under it by HYSTERESIS points.
    const margin = wasLow ? HYSTERESIS : 0;
    const overFs = fsUsed > fsLimit - margin;
    const overAlloc = allocLimit !== null && allocatedPct > allocLimit - margin;
    const low = overFs || overAlloc;
    const why = !low
      ? null
      : overFs
        ? `its filesystem is ${fsUsed.toFixed(1)}% used (space_threshold.filesystem ${fsLimit}%, ${fmt(fsFree)} free)`
        : `${allocatedPct.toFixed(1)}% of its ${fmt(size)} is allocated (space_threshold.allocated ${allocLimit}%)`;
    if (low && !wasLow) {
      this.#crossings++;
      this.o.log.warn(`volume ${this.o.volume}: low on space: ${why}; writes fail with NO SPACE when the filesystem fills`, meta);
    } else if (!low && wasLow) {
      this.o.log.info(`volume ${this.o.volume}: space back under its thresholds (filesystem ${fsUsed.toFixed(1)}% used, ${allocatedPct.toFixed(1)}% allocated)`, meta);
    }
    this.#info = {
      allocatedBytes: allocated,
      filesystemBytes: fsTotal,
      filesystemFreeBytes: fsFree,
      filesystemUsedPercent: round1(fsUsed),
      allocatedPercent: round1(allocatedPct),
      thresholds: { filesystem: fsLimit, allocated: allocLimit },
      low,
      why,
      crossings: this.#crossings,
    };
    this.o.lu.setSpaceLow(low);
  }
}

function round1(x: number): number {
  return Math.round(x * 10) / 10;
}

function fmt(bytes: number): string {
  return bytes >= 2 ** 30 ? `${(bytes / 2 ** 30).toFixed(1)} GiB` : `${(bytes / 2 ** 20).toFixed(1)} MiB`;
}
