// Errors that backends raise themselves carry the same shape as Node's fs
// errors and the addon's errors (a string errno `code`), so the SCSI core's
// single errno-to-sense map (target/scsi/sense-map.ts) handles all of them.
import { constants } from 'node:os';
import type { BackendError } from './backend.js';

export function backendError(code: string, message: string): BackendError {
  const err = new Error(message) as BackendError;
  err.code = code;
  const errno = (constants.errno as Record<string, number | undefined>)[code];
  if (errno !== undefined) err.errno = errno;
  return err;
}

export function hasCode(err: unknown, ...codes: string[]): boolean {
  if (typeof err !== 'object' || err === null || !('code' in err)) return false;
  const { code } = err;
  return typeof code === 'string' && codes.includes(code);
}

/** The filesystem or device does not implement the operation (fallocate mode, ioctl). */
export function isUnsupported(err: unknown): boolean {
  return hasCode(err, 'EOPNOTSUPP', 'ENOTSUP', 'ENOSYS', 'ENOTTY');
}
