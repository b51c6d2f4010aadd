// Bounds and alignment checks shared by the backends. The SCSI core checks LBA
// ranges first (SBC-4 4.5, LBA OUT OF RANGE); these are the backstop that keeps
// a core bug from writing past the volume or growing its file.
import { backendError } from './backend-error.js';

export function checkRange(what: string, op: string, offset: number, length: number, size: number): void {
  if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length < 0) {
    throw backendError('EINVAL', `${what}: ${op} of ${length} bytes at offset ${offset}: offset and length must be non-negative integers`);
  }
  if (offset + length > size) {
    throw backendError('EINVAL', `${what}: ${op} of ${length} bytes at offset ${offset} goes past the end of the volume (${size} bytes)`);
  }
}

/** O_DIRECT and the block-device range ioctls need offset and length in whole logical blocks. */
export function checkAligned(what: string, op: string, offset: number, length: number, blockSize: number): void {
  if (offset % blockSize !== 0 || length % blockSize !== 0) {
    throw backendError('EINVAL', `${what}: ${op} of ${length} bytes at offset ${offset} is not aligned to the ${blockSize}-byte logical block size`);
  }
}

export function checkBlockSize(what: string, blockSize: number): void {
  if (!Number.isInteger(blockSize) || blockSize < 512 || (blockSize & (blockSize - 1)) !== 0) {
    throw backendError('EINVAL', `${what}: logical block size ${blockSize} must be a power of two of at least 512`);
  }
}
