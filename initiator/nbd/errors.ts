// Errors on both sides of the export: BlockDevice failures become NBD error
// values here and nowhere else, and a peer that breaks the protocol becomes a
// ProtocolViolation that ends only its own connection.
import type { BlockErrorCode } from '../block-device.js';
import { Errno, type NbdErrno } from './constants.js';

/** The client broke a MUST of the protocol; its connection is closed. */
export class ProtocolViolation extends Error {
  override readonly name = 'ProtocolViolation';
}

/** The byte stream ended (peer closed, reset, or the server is stopping). */
export class StreamClosed extends Error {
  override readonly name = 'StreamClosed';
}

/** A request failure with a chosen NBD error value, raised inside the server. */
export class NbdRequestError extends Error {
  override readonly name = 'NbdRequestError';
  constructor(
    readonly errno: NbdErrno,
    message: string,
  ) {
    super(message);
  }
}

const BY_CODE: Record<BlockErrorCode, NbdErrno> = {
  // Reads, trims and cache hints beyond the end are EINVAL; writes get ENOSPC
  // (see nbdErrno below).
  LBA_OUT_OF_RANGE: Errno.EINVAL,
  WRITE_PROTECTED: Errno.EPERM,
  MEDIUM_ERROR: Errno.EIO,
  NO_SPACE: Errno.ENOSPC,
  NOT_SUPPORTED: Errno.ENOTSUP,
  INVALID: Errno.EINVAL,
  CONNECTION_LOST: Errno.EIO,
  IO_ERROR: Errno.EIO,
};

function blockErrorCode(err: unknown): BlockErrorCode | undefined {
  if (!(err instanceof Error)) return undefined;
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && Object.hasOwn(BY_CODE, code) ? (code as BlockErrorCode) : undefined;
}

/**
 * The NBD error value for a failed request. `writes` marks commands that
 * store data (WRITE, WRITE_ZEROES): proto.md "Error values" asks for ENOSPC
 * when those reach past the end, and EINVAL for everything else out of range.
 * Anything that is not a BlockError is EIO.
 */
export function nbdErrno(err: unknown, writes: boolean): NbdErrno {
  if (err instanceof NbdRequestError) return err.errno;
  const code = blockErrorCode(err);
  if (code === undefined) return Errno.EIO;
  if (code === 'LBA_OUT_OF_RANGE' && writes) return Errno.ENOSPC;
  return BY_CODE[code];
}

/** True when the failure is the device's verdict rather than a fault in the server. */
export function isExpectedFailure(err: unknown): boolean {
  return err instanceof NbdRequestError || blockErrorCode(err) !== undefined;
}

export function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
