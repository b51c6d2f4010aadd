// Sizes and durations as people type them: 4k, 1MiB, 1g, 10s, 500ms. Sizes
// take the config file's units (config/size.ts): K/M/G/T and KiB..TiB are
// powers of 1024 (what dd, fio and qemu-img mean by them); kB, MB, GB, TB are
// powers of 1000.
import { parseSize as parseByteSize } from '../../config/size.js';
import { UsageError } from './cli-error.js';

const DURATION_UNITS: ReadonlyMap<string, number> = new Map([
  ['ms', 1],
  ['', 1000],
  ['s', 1000],
  ['m', 60_000],
  ['min', 60_000],
  ['h', 3_600_000],
]);

const NUMBER_WITH_UNIT = /^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$/;

/** Bytes from `4096`, `4k`, `1MiB`, `1.5g` (config/size.ts's units); `what` names the option in the error. */
export function parseSize(text: string, what: string): number {
  const r = parseByteSize(text);
  if (r.ok) return r.bytes;
  if (r.reason === 'inexact') throw new UsageError(`${what}: '${text}' is not a whole number of bytes`);
  throw new UsageError(`${what}: invalid size '${text}' (a byte count, or a number with a unit: 4k, 1MiB, 2g)`);
}

/** Milliseconds from `10s`, `500ms`, `2m`, `1h`; a bare number is seconds. */
export function parseDuration(text: string, what: string): number {
  const m = NUMBER_WITH_UNIT.exec(text);
  const unit = m ? DURATION_UNITS.get(m[2].toLowerCase()) : undefined;
  if (!m || unit === undefined) throw new UsageError(`${what}: invalid duration '${text}' (for example 10s, 500ms, 2m)`);
  return Math.round(Number(m[1]) * unit);
}

/** The shortest exact IEC rendering: "16 MiB", "1.5 GiB"; else with one decimal, else bytes. */
export function formatBytes(bytes: number): string {
  const names = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  for (let i = names.length - 1; i > 0; i--) {
    const scaled = bytes / 1024 ** i;
    if (scaled >= 1) return Number.isInteger(scaled * 100) ? `${scaled} ${names[i]}` : `${scaled.toFixed(1)} ${names[i]}`;
  }
  return `${bytes} bytes`;
}

/** A rate in bytes per second, as MiB/s or GiB/s. */
export function formatRate(bytesPerSecond: number): string {
  if (bytesPerSecond >= 1024 ** 3) return `${(bytesPerSecond / 1024 ** 3).toFixed(2)} GiB/s`;
  return `${(bytesPerSecond / 1024 ** 2).toFixed(1)} MiB/s`;
}
