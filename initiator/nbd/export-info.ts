// What the server tells a client about one export: size, transmission flags
// and size constraints, all derived from the BlockDevice behind it.
import type { BlockDevice } from '../block-device.js';
import { MAX_PAYLOAD_CAP, TransmissionFlag } from './constants.js';

export interface NbdExport {
  /** Canonical name, as listed by NBD_OPT_LIST. */
  readonly name: string;
  readonly device: BlockDevice;
  /** Minimum block size: the device's logical block; requests must align to it. */
  readonly minBlock: number;
  readonly preferredBlock: number;
  /** Largest READ or WRITE payload accepted. */
  readonly maxPayload: number;
}

function isPowerOfTwo(n: number): boolean {
  return Number.isSafeInteger(n) && n > 0 && (n & (n - 1)) === 0;
}

/**
 * Checks the device against proto.md "Size constraints" and fixes the three
 * sizes: min = blockSize, preferred = max(4096, blockSize), max =
 * min(maxTransfer, 32 MiB) rounded down to whole blocks.
 */
export function describeExport(name: string, device: BlockDevice): NbdExport {
  const what = `NBD export "${name}"`;
  const bs = device.blockSize;
  // proto.md: the minimum block size MUST be a power of 2 no larger than 2^16;
  // from 512 up, the preferred size below can always stay within the maximum.
  if (!isPowerOfTwo(bs) || bs < 512 || bs > 65536) {
    throw new RangeError(`${what}: block size ${bs} must be a power of two from 512 to 65536`);
  }
  if (!Number.isSafeInteger(device.size) || device.size < 0 || device.size % bs !== 0) {
    throw new RangeError(`${what}: size ${device.size} must be a whole number of ${bs}-byte blocks`);
  }
  if (!Number.isSafeInteger(device.maxTransfer) || device.maxTransfer < bs) {
    throw new RangeError(`${what}: max transfer ${device.maxTransfer} must be at least one block (${bs})`);
  }
  if (Buffer.byteLength(name) > 4096) {
    throw new RangeError(`${what}: export names are limited to 4096 bytes`);
  }
  const maxPayload = Math.floor(Math.min(device.maxTransfer, MAX_PAYLOAD_CAP) / bs) * bs;
  // proto.md: preferred is a power of two, at least max(min, 512), and no
  // larger than the maximum payload.
  let preferredBlock = Math.max(4096, bs);
  while (preferredBlock > maxPayload) preferredBlock /= 2;
  return { name, device, minBlock: bs, preferredBlock, maxPayload };
}

/**
 * Transmission flags (proto.md "Transmission flags"). DF is only offered
 * once structured replies are negotiated, as the spec requires; reads are
 * always answered in one chunk, so DF costs nothing.
 */
export function transmissionFlags(exp: NbdExport, structured: boolean): number {
  const device = exp.device;
  // CAN_MULTI_CONN: every connection to an export drives the same
  // BlockDevice object and the server keeps no cache of its own, so a FLUSH
  // or FUA write answered on one connection covers writes completed on all
  // of them (the device's flush covers every completed write).
  let flags =
    TransmissionFlag.HAS_FLAGS |
    TransmissionFlag.SEND_FLUSH |
    TransmissionFlag.CAN_MULTI_CONN |
    TransmissionFlag.SEND_CACHE;
  if (device.readOnly) {
    flags |= TransmissionFlag.READ_ONLY;
  } else {
    // SEND_FAST_ZERO is honest because every FAST_ZERO request fails at
    // once with ENOTSUP (proto.md NBD_CMD_WRITE_ZEROES allows exactly that):
    // the BlockDevice cannot promise that zeroing beats writing.
    flags |=
      TransmissionFlag.SEND_FUA | TransmissionFlag.SEND_WRITE_ZEROES | TransmissionFlag.SEND_FAST_ZERO;
    if (device.canDiscard) flags |= TransmissionFlag.SEND_TRIM;
  }
  if (structured) flags |= TransmissionFlag.SEND_DF;
  return flags;
}
