// errno → NVMe status: the one place where a backend failure becomes an NVMe
// completion status (as target/scsi/sense-map.ts is for SCSI sense). Backends
// throw Node-style errors with a string code (target/backend/backend.ts).
import { Status, type NvmeStatus } from '../../protocol/nvme/command.js';
import { CommandAborted } from '../scsi/range-lock.js';

export type NvmeIoKind = 'read' | 'write' | 'flush' | 'discard' | 'compare';

function errnoCode(e: unknown): string | undefined {
  if (typeof e !== 'object' || e === null || !('code' in e)) return undefined;
  const code = (e as { code: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * The mapping, and why (Base 2.0 §4.6.1.2; NVM Command Set 1.0 §2.1.2):
 * - EIO, EBADMSG, EILSEQ: a media error: Unrecovered Read Error (2h/81h) on a
 *   read or compare, Write Fault (2h/80h) on anything that writes.
 * - ENOSPC, EDQUOT: a thin namespace ran out of space: Capacity Exceeded (0h/81h).
 * - EROFS, EPERM, EACCES: the store refuses writes: Namespace is Write Protected (0h/20h).
 * - ENOMEM, EAGAIN, EBUSY, ENOBUFS, ETIMEDOUT, ESHUTDOWN, EBADF: transient or
 *   the store is going away: Namespace Not Ready (0h/82h) without DNR, so the
 *   host retries (as Linux does for it), or fails over.
 * - a command of a fenced connection (range-lock.ts CommandAborted): Command
 *   Abort Requested (0h/07h).
 * - anything else: Internal Error (0h/06h), without DNR.
 */
export function statusForError(kind: NvmeIoKind, e: unknown): NvmeStatus {
  if (e instanceof CommandAborted) return Status.AbortRequested;
  switch (errnoCode(e)) {
    case 'EIO':
    case 'EBADMSG':
    case 'EILSEQ':
      return kind === 'read' || kind === 'compare' ? Status.UnrecoveredReadError : Status.WriteFault;
    case 'ENOSPC':
    case 'EDQUOT':
      return Status.CapacityExceeded;
    case 'EROFS':
    case 'EPERM':
    case 'EACCES':
      return Status.NamespaceWriteProtected;
    case 'ENOMEM':
    case 'EAGAIN':
    case 'EBUSY':
    case 'ENOBUFS':
    case 'ETIMEDOUT':
    case 'ESHUTDOWN':
    case 'EBADF':
      return Status.NamespaceNotReady;
    default:
      return Status.InternalError;
  }
}
