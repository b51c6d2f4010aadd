// --offset and --length against a volume: whole blocks, inside the volume.
// SBC-4 addresses logical blocks, so a byte range that is not block-aligned
// cannot be sent as one READ or WRITE; the CLI refuses it rather than doing a
// read-modify-write behind the user's back.
import { UsageError } from './cli-error.js';
import { formatBytes, parseSize } from './size.js';

export interface ByteRange {
  offset: number;
  length: number;
}

export interface RangeArgs {
  offset?: string;
  length?: string;
}

export interface VolumeShape {
  name: string;
  size: number;
  blockSize: number;
}

/** The sizes in the flags, parsed before connecting so a typo fails fast. */
export function parseRangeArgs(a: RangeArgs): { offset?: number; length?: number } {
  return {
    ...(a.offset !== undefined ? { offset: parseSize(a.offset, '--offset') } : {}),
    ...(a.length !== undefined ? { length: parseSize(a.length, '--length') } : {}),
  };
}

/** The range the flags name in this volume: offset default 0, length default the rest. */
export function resolveRange(vol: VolumeShape, r: { offset?: number; length?: number }): ByteRange {
  const bs = vol.blockSize;
  const offset = r.offset ?? 0;
  if (offset % bs !== 0) throw new UsageError(`--offset ${offset} is not a multiple of volume ${vol.name}'s ${bs}-byte block size`);
  if (offset > vol.size) throw new UsageError(`--offset ${offset} is past the end of volume ${vol.name} (${vol.size} bytes, ${formatBytes(vol.size)})`);
  const length = r.length ?? vol.size - offset;
  if (length % bs !== 0) throw new UsageError(`--length ${length} is not a multiple of volume ${vol.name}'s ${bs}-byte block size`);
  if (offset + length > vol.size) {
    throw new UsageError(`[${offset}, +${length}) runs past the end of volume ${vol.name} (${vol.size} bytes, ${formatBytes(vol.size)})`);
  }
  return { offset, length };
}

/** Chunks of at most `max` bytes covering the range, in order. */
export function chunks(range: ByteRange, max: number): ByteRange[] {
  const out: ByteRange[] = [];
  for (let at = 0; at < range.length; at += max) out.push({ offset: range.offset + at, length: Math.min(max, range.length - at) });
  return out;
}
