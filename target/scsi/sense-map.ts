// errno → sense: the one place where a backend failure becomes SCSI status.
// Backends throw Node-style errors with a string code (target/backend/backend.ts);
// handlers wrap each backend call with `io()` so the operation kind travels
// with the error, and the command lifecycle calls `outcomeForError()`.
import {
  ALUA_UNAVAILABLE,
  INTERNAL_TARGET_FAILURE,
  LOGICAL_UNIT_COMMUNICATION_FAILURE,
  LOGICAL_UNIT_COMMUNICATION_TIMEOUT,
  LBA_OUT_OF_RANGE,
  SPACE_ALLOCATION_FAILED_WRITE_PROTECT,
  UNRECOVERED_READ_ERROR,
  WRITE_ERROR,
  WRITE_PROTECTED,
} from '../../protocol/scsi/sense-codes.js';
import { BUSY, check, type Outcome } from './outcome.js';

export type IoKind = 'read' | 'write' | 'flush' | 'discard' | 'extent';

/** A backend failure tagged with what the core asked the backend to do. */
export class BackendIoError extends Error {
  readonly kind: IoKind;
  readonly code: string | undefined;

  constructor(kind: IoKind, cause: unknown) {
    const code = errnoCode(cause);
    super(`backend ${kind} failed: ${code ?? (cause instanceof Error ? cause.message : String(cause))}`, { cause });
    this.name = 'BackendIoError';
    this.kind = kind;
    this.code = code;
  }
}

function errnoCode(e: unknown): string | undefined {
  if (typeof e !== 'object' || e === null || !('code' in e)) return undefined;
  const code = (e as { code: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

/** Runs one backend call, tagging a rejection with its kind. */
export async function io<T>(kind: IoKind, call: Promise<T>): Promise<T> {
  try {
    return await call;
  } catch (e) {
    throw new BackendIoError(kind, e);
  }
}

/**
 * The mapping, and why:
 * - EIO (and EBADMSG, EILSEQ): a medium error. SBC-4 4.17 / SPC-5 annex D:
 *   UNRECOVERED READ ERROR (03 11/00) on a read, WRITE ERROR (03 0C/00) on a
 *   write; flush and discard fail a write, so they take 03 0C/00 too.
 * - ENOSPC, EDQUOT: a thin volume ran out of space. SBC-4 4.7.3.7 names this
 *   SPACE ALLOCATION FAILED WRITE PROTECT (07 27/07), as LIO reports it.
 * - EROFS, EPERM, EACCES: the backing store refuses writes: WRITE PROTECTED
 *   (07 27/00).
 * - ENOMEM, EAGAIN, EBUSY, ENOBUFS: transient. Status BUSY (SAM-5 5.3.1) makes
 *   every initiator retry without consuming its retry count for errors;
 *   ABORTED COMMAND 0B 55/03 would also be retried but counts as a failure.
 * - EOVERFLOW, EFBIG: the range lies past the store's end (it shrank under
 *   the command): LOGICAL BLOCK ADDRESS OUT OF RANGE (05 21/00).
 * - ETIMEDOUT, and ENOTCONN, ECONNREFUSED, EHOSTUNREACH,
 *   ENETUNREACH: storage behind the target is out of reach (a Ceph cluster
 *   that does not answer within rados_osd_op_timeout, docs/backends.md "rbd").
 *   ABORTED COMMAND with LOGICAL UNIT COMMUNICATION TIME-OUT (0B 08/01) or
 *   FAILURE (0B 08/00): the command may be retried, here or through another
 *   gateway, and the medium is not reported bad.
 * - ESHUTDOWN: librados's EBLOCKLISTED. The Ceph cluster fenced this gateway
 *   from the image (another gateway broke its exclusive lock, docs/backends.md
 *   "rbd"), and nothing it sends will be applied until rblkd opens the image
 *   again: LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN UNAVAILABLE STATE
 *   (02 04/0C, SPC-4 5.15.2.4.5), which a multipath initiator takes to another
 *   path at once instead of retrying here.
 * - anything else, and non-errno exceptions: INTERNAL TARGET FAILURE (04 44/00).
 */
export function outcomeForError(e: unknown): Outcome {
  if (!(e instanceof BackendIoError)) return check(INTERNAL_TARGET_FAILURE);
  switch (e.code) {
    case 'EIO':
    case 'EBADMSG':
    case 'EILSEQ':
      return check(e.kind === 'read' || e.kind === 'extent' ? UNRECOVERED_READ_ERROR : WRITE_ERROR);
    case 'ENOSPC':
    case 'EDQUOT':
      return check(SPACE_ALLOCATION_FAILED_WRITE_PROTECT);
    case 'EROFS':
    case 'EPERM':
    case 'EACCES':
      return check(WRITE_PROTECTED);
    case 'ENOMEM':
    case 'EAGAIN':
    case 'EBUSY':
    case 'ENOBUFS':
      return BUSY;
    case 'EOVERFLOW':
    case 'EFBIG':
      return check(LBA_OUT_OF_RANGE);
    case 'ETIMEDOUT':
      return check(LOGICAL_UNIT_COMMUNICATION_TIMEOUT);
    case 'ESHUTDOWN':
      return check(ALUA_UNAVAILABLE);
    case 'ENOTCONN':
    case 'ECONNREFUSED':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return check(LOGICAL_UNIT_COMMUNICATION_FAILURE);
    default:
      return check(INTERNAL_TARGET_FAILURE);
  }
}
