// A volume's current rates for `rblkd ctl volumes` (docs/operations.md "QoS
// limits"): read and write commands and bytes per second, from the request
// core's counters (target/scsi/request/io-stats.ts), which every path, the
// native fast path included, reports into. Nothing runs on a timer: each
// query is a sample, and the rates are over the time since the latest
// earlier sample at least WINDOW_MS old (since the volume opened, at first).
import { IO_CLASSES, type IoStats } from '../scsi/index.js';

const WINDOW_MS = 1000;
const READ = IO_CLASSES.indexOf('read');
const WRITE = IO_CLASSES.indexOf('write');

interface Sample {
  at: number;
  readOps: number;
  writeOps: number;
  readBytes: number;
  writeBytes: number;
}

export interface VolumeRates {
  /** The window the rates are over, seconds. */
  seconds: number;
  iops: number;
  readIops: number;
  writeIops: number;
  /** Bytes per second. */
  bps: number;
  readBps: number;
  writeBps: number;
}

export class RateMeter {
  #samples: Sample[];

  constructor(private readonly stats: IoStats) {
    this.#samples = [this.#sample()];
  }

  #sample(): Sample {
    const c = this.stats.classes;
    return { at: performance.now(), readOps: c[READ]!.ops, writeOps: c[WRITE]!.ops, readBytes: c[READ]!.bytes, writeBytes: c[WRITE]!.bytes };
  }

  rates(): VolumeRates {
    const now = this.#sample();
    // The newest sample at least a window old is the base; older ones are no longer needed.
    let base = 0;
    for (let i = 0; i < this.#samples.length; i++) if (now.at - this.#samples[i]!.at >= WINDOW_MS) base = i;
    this.#samples = [...this.#samples.slice(base), now];
    const from = this.#samples[0]!;
    const s = Math.max((now.at - from.at) / 1000, 1e-3);
    const r = (n: number): number => Math.round(n / s);
    const readIops = r(now.readOps - from.readOps);
    const writeIops = r(now.writeOps - from.writeOps);
    const readBps = r(now.readBytes - from.readBytes);
    const writeBps = r(now.writeBytes - from.writeBytes);
    return { seconds: Math.round(s * 1000) / 1000, iops: readIops + writeIops, readIops, writeIops, bps: readBps + writeBps, readBps, writeBps };
  }
}
