// pread/pwrite loops over a FileHandle, shared by the file and block-device
// backends. FileHandle.read/write run on the libuv pool and use the caller's
// Buffer in place, so registered memory goes to the disk without a copy.
import type { FileHandle } from 'node:fs/promises';
import { backendError, hasCode } from './backend-error.js';

export interface PositionalTarget {
  /** Names the volume in error messages. */
  what: string;
  /** Set for O_DIRECT descriptors: the memory alignment that a bare EINVAL means was missed. */
  directAlignment: number | null;
}

// With offset and length already checked, an EINVAL from O_DIRECT I/O means the
// buffer's address is misaligned; say so rather than pass on a bare EINVAL.
function explain(err: unknown, target: PositionalTarget, op: string, length: number, offset: number): unknown {
  if (target.directAlignment === null || !hasCode(err, 'EINVAL')) return err;
  return backendError(
    'EINVAL',
    `${target.what}: O_DIRECT ${op} of ${length} bytes at offset ${offset} was refused (EINVAL): ` +
      `the buffer's memory address must be aligned to ${target.directAlignment} bytes`,
  );
}

/**
 * Fills buf from offset. A read that reaches end of file fails with EIO rather
 * than returning zeroes: the file shrank underneath the volume, so data that
 * was acknowledged is gone, and a medium error (SBC-4 4.18, 03 11/00) is the
 * honest answer (tgt's bs_rdwr.c and nvmet's io-cmd-file.c fail short reads too).
 */
export async function readFully(fh: FileHandle, target: PositionalTarget, buf: Buffer, offset: number): Promise<void> {
  let done = 0;
  while (done < buf.length) {
    let bytesRead: number;
    try {
      ({ bytesRead } = await fh.read(buf, done, buf.length - done, offset + done));
    } catch (err) {
      throw explain(err, target, 'read', buf.length, offset);
    }
    if (bytesRead === 0) {
      throw backendError(
        'EIO',
        `${target.what}: end of file at byte ${offset + done} while reading ${buf.length} bytes at offset ${offset} (the backing store shrank)`,
      );
    }
    done += bytesRead;
  }
}

export async function writeFully(fh: FileHandle, target: PositionalTarget, buf: Buffer, offset: number): Promise<void> {
  let done = 0;
  while (done < buf.length) {
    let bytesWritten: number;
    try {
      ({ bytesWritten } = await fh.write(buf, done, buf.length - done, offset + done));
    } catch (err) {
      throw explain(err, target, 'write', buf.length, offset);
    }
    if (bytesWritten === 0) {
      throw backendError('EIO', `${target.what}: write of ${buf.length} bytes at offset ${offset} made no progress at byte ${offset + done}`);
    }
    done += bytesWritten;
  }
}
