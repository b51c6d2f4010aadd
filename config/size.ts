// Byte sizes as people write them in a config file: 268435456, "256MiB", "1.5 GiB", "4k".
// Suffixes follow coreutils (truncate, dd): a bare K/M/G/T/P and the IEC KiB..PiB are powers
// of 1024; kB/KB, MB, GB, TB, PB are powers of 1000. Units are case-insensitive, so "4k" and
// "512m" mean what they mean to qemu-img and truncate.

const UNITS: ReadonlyMap<string, number> = new Map([
  ['', 1],
  ['b', 1],
  ['k', 1024],
  ['kib', 1024],
  ['kb', 1000],
  ['m', 1024 ** 2],
  ['mib', 1024 ** 2],
  ['mb', 1000 ** 2],
  ['g', 1024 ** 3],
  ['gib', 1024 ** 3],
  ['gb', 1000 ** 3],
  ['t', 1024 ** 4],
  ['tib', 1024 ** 4],
  ['tb', 1000 ** 4],
  ['p', 1024 ** 5],
  ['pib', 1024 ** 5],
  ['pb', 1000 ** 5],
]);

const SIZE_RE = /^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$/;

export type SizeResult =
  | { ok: true; bytes: number }
  /** invalid: not a number with a known unit; inexact: not a whole, safe number of bytes. */
  | { ok: false; message: string; reason: 'invalid' | 'inexact' };

/** Parses a byte count or a size string; the result is always a safe non-negative integer. */
export function parseSize(value: number | string): SizeResult {
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value) || value < 0) {
      return { ok: false, message: `must be a whole number of bytes, not ${value}`, reason: 'inexact' };
    }
    return { ok: true, bytes: value };
  }
  const m = SIZE_RE.exec(value);
  const unit = m ? UNITS.get(m[2].toLowerCase()) : undefined;
  if (!m || unit === undefined) {
    return {
      ok: false,
      message: `invalid size '${value}' (write bytes, or a number with a unit such as 512MiB, 1GiB, 10GB)`,
      reason: 'invalid',
    };
  }
  const bytes = Number(m[1]) * unit;
  if (!Number.isSafeInteger(bytes)) {
    return { ok: false, message: `size '${value}' is not a whole number of bytes, or is too large`, reason: 'inexact' };
  }
  return { ok: true, bytes };
}

/** The shortest exact IEC rendering ("256 MiB", "1.5 GiB" only when exact, else bytes). */
export function formatSize(bytes: number): string {
  const names = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = names.length - 1;
  for (; i > 0; i--) {
    const scaled = bytes / 1024 ** i;
    if (scaled >= 1 && Number.isInteger(scaled * 4)) return `${scaled} ${names[i]}`;
  }
  return `${bytes} bytes`;
}
