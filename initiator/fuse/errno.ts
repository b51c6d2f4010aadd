// BlockDevice errors become FUSE errnos here, and only here.
import { FuseError, type ErrnoName } from '../../native/fuse.js';
import type { BlockErrorCode } from '../block-device.js';

const BY_CODE: Record<BlockErrorCode, ErrnoName> = {
  LBA_OUT_OF_RANGE: 'EINVAL',
  WRITE_PROTECTED: 'EROFS',
  MEDIUM_ERROR: 'EIO',
  NO_SPACE: 'ENOSPC',
  NOT_SUPPORTED: 'EOPNOTSUPP',
  INVALID: 'EINVAL',
  // A lost session is EIO to whoever reads, as a pulled disk is.
  CONNECTION_LOST: 'EIO',
  IO_ERROR: 'EIO',
};

/** A FuseError for err: its BlockErrorCode's errno, else EIO. */
export function toFuseError(err: unknown): FuseError {
  if (err instanceof FuseError) return err;
  const code = (err as { code?: unknown } | null)?.code;
  const name = typeof code === 'string' && Object.hasOwn(BY_CODE, code) ? BY_CODE[code as BlockErrorCode] : 'EIO';
  return new FuseError(name, err instanceof Error ? err.message : String(err));
}
