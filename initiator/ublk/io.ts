// One ublk request served on a BlockDevice (initiator/block-device.ts): the
// descriptor the driver filled for a tag (uapi.ts) becomes one device call,
// and its outcome the result a COMMIT_AND_FETCH_REQ carries back: the bytes
// done, or -errno. Without zero copy the driver copies a write's data into the
// tag's buffer before the request is fetched and copies a read's out of it
// after the commit, so the buffer here is that per-tag memory. This is the
// part of docs/ublk.md that runs without the kernel module; the ring that
// fetches and commits is the native side's.
import { constants } from 'node:os';
import type { BlockDevice, BlockErrorCode } from '../block-device.js';
import { UblkIoFlag, UblkOp, type UblkIoDesc } from './uapi.js';

const E = constants.errno;

/** ublk counts in 512-byte sectors whatever the logical block size (ublk_param_basic). */
export const UBLK_SECTOR = 512;

/**
 * The block layer turns a negative result into a blk_status_t by errno, so
 * the errno says what the kernel above (filesystems, dm-multipath) is told:
 * ENOLINK is a transport failure multipath may retry on another path,
 * ENODATA a medium error, ENOSPC and EOPNOTSUPP their own statuses, and
 * anything else a plain I/O error.
 */
const BY_CODE: Record<BlockErrorCode, number> = {
  LBA_OUT_OF_RANGE: E.EIO,
  // The device is added read-only (UBLK_ATTR_READ_ONLY) when the volume is,
  // so this is a volume that became read-only under a live device.
  WRITE_PROTECTED: E.EIO,
  MEDIUM_ERROR: E.ENODATA,
  NO_SPACE: E.ENOSPC,
  NOT_SUPPORTED: E.EOPNOTSUPP,
  INVALID: E.EIO,
  CONNECTION_LOST: E.ENOLINK,
  IO_ERROR: E.EIO,
};

/** The -errno result for a failed request; anything that is not a BlockError is -EIO. */
export function ublkResult(err: unknown): number {
  const code = (err as { code?: unknown } | null)?.code;
  return -(typeof code === 'string' && Object.hasOwn(BY_CODE, code) ? BY_CODE[code as BlockErrorCode] : E.EIO);
}

export type UblkPlan =
  | { kind: 'read' | 'write'; offset: number; length: number; fua: boolean }
  | { kind: 'flush' }
  | { kind: 'discard'; offset: number; length: number }
  | { kind: 'writeZeroes'; offset: number; length: number; unmap: boolean }
  | { kind: 'refuse'; result: number; why: string };

/**
 * What a descriptor asks of the device, checked as the driver's own limits
 * promise (aligned to the logical block, inside the device, at most the
 * tag's buffer) so that a broken descriptor is refused, never executed.
 */
export function planUblkIo(d: UblkIoDesc, dev: { size: number; blockSize: number; readOnly: boolean; canDiscard: boolean }, bufferBytes: number): UblkPlan {
  if (d.op === UblkOp.FLUSH) return { kind: 'flush' };
  const offset = Number(d.startSector) * UBLK_SECTOR;
  const length = d.nrSectors * UBLK_SECTOR;
  const refuse = (result: number, why: string): UblkPlan => ({ kind: 'refuse', result: -result, why });
  if (![UblkOp.READ, UblkOp.WRITE, UblkOp.DISCARD, UblkOp.WRITE_ZEROES].includes(d.op as 0)) return refuse(E.EOPNOTSUPP, `ublk op ${d.op} is not served`);
  if (!Number.isSafeInteger(offset) || offset % dev.blockSize !== 0 || length % dev.blockSize !== 0) return refuse(E.EINVAL, `sectors ${d.startSector}+${d.nrSectors} are not aligned to the ${dev.blockSize}-byte block`);
  if (length === 0 || offset + length > dev.size) return refuse(E.EIO, `sectors ${d.startSector}+${d.nrSectors} are outside the ${dev.size}-byte device`);
  const writes = d.op !== UblkOp.READ;
  if (writes && dev.readOnly) return refuse(E.EIO, 'the volume is read-only');
  switch (d.op) {
    case UblkOp.READ:
    case UblkOp.WRITE:
      if (length > bufferBytes) return refuse(E.EINVAL, `${length} bytes do not fit the tag's ${bufferBytes}-byte buffer`);
      return { kind: d.op === UblkOp.READ ? 'read' : 'write', offset, length, fua: (d.flags & UblkIoFlag.FUA) !== 0 };
    case UblkOp.DISCARD:
      if (!dev.canDiscard) return refuse(E.EOPNOTSUPP, 'the volume does not deallocate');
      return { kind: 'discard', offset, length };
    default:
      // NOUNMAP: the zeroes must stay allocated (REQ_NOUNMAP).
      return { kind: 'writeZeroes', offset, length, unmap: (d.flags & UblkIoFlag.NOUNMAP) === 0 && dev.canDiscard };
  }
}

/**
 * Serves one request: resolves with the COMMIT result (bytes done, 0 for
 * flush, discard and write-zeroes as the driver expects, or -errno); never
 * rejects, since a tag must always be committed.
 */
export async function serveUblkIo(dev: BlockDevice, d: UblkIoDesc, buffer: Buffer): Promise<number> {
  const p = planUblkIo(d, dev, buffer.length);
  try {
    switch (p.kind) {
      case 'refuse':
        return p.result;
      case 'flush':
        await dev.flush();
        return 0;
      case 'read': {
        const into = buffer.subarray(0, p.length);
        if (dev.readInto) await dev.readInto(p.offset, into);
        else (await dev.read(p.offset, p.length)).copy(into);
        return p.length;
      }
      case 'write':
        await dev.write(p.offset, buffer.subarray(0, p.length), { fua: p.fua });
        return p.length;
      case 'discard':
        await dev.discard(p.offset, p.length);
        return 0;
      case 'writeZeroes':
        await dev.writeZeroes(p.offset, p.length, { unmap: p.unmap });
        return 0;
    }
  } catch (e) {
    return ublkResult(e);
  }
}
