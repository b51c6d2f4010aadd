// The errors the rblk library rejects with: one class with a stable code, and
// the one place where SCSI status and sense become those codes (the initiator's
// mirror of target/scsi/sense-map.ts).
import { decodeSense, describeSense, type Sense } from '../protocol/scsi/sense.js';
import { SenseKey } from '../protocol/scsi/sense-codes.js';
import { ScsiStatus, statusName } from '../protocol/scsi/status.js';
import type { BlockErrorCode } from './block-device.js';

/**
 * Every code an {@link RblkError} carries. The first eight are the
 * {@link BlockErrorCode}s that NBD and FUSE exports map to errno values.
 */
export type RblkErrorCode =
  | BlockErrorCode
  | 'MISCOMPARE'
  | 'RESERVATION_CONFLICT'
  | 'BUSY'
  | 'TIMEOUT'
  | 'ABORTED'
  | 'LOGIN_FAILED'
  | 'AUTH_FAILED'
  /** I/O through a registered buffer (or a view of one) after its release(). */
  | 'BUFFER_RELEASED';

export interface RblkErrorDetails {
  /** SCSI status of the command that failed (SAM-5 5.3.1), when a command failed. */
  status?: number;
  /** The decoded sense data, when the target sent any. */
  sense?: Sense;
  /** The NVMe status of the command that failed (Base 2.0 §4.6.1.2), for an nvme+tcp session. */
  nvme?: { sct: number; sc: number; dnr?: boolean };
  cause?: unknown;
}

/** A failure of a session or a volume operation; `code` says which kind. */
export class RblkError extends Error {
  readonly code: RblkErrorCode;
  /** SCSI status, when the error is a command's verdict. */
  declare readonly status?: number;
  /** Decoded sense data, when the target returned CHECK CONDITION. */
  declare readonly sense?: Sense;
  /** NVMe status (SCT, SC, DNR), when an nvme+tcp command failed. */
  declare readonly nvme?: { sct: number; sc: number; dnr?: boolean };

  constructor(code: RblkErrorCode, message: string, details: RblkErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'RblkError';
    this.code = code;
    // Declared fields, set only when present, so a login error shows no empty status or sense.
    if (details.status !== undefined) this.status = details.status;
    if (details.sense !== undefined) this.sense = details.sense;
    if (details.nvme !== undefined) this.nvme = details.nvme;
  }
}

/**
 * COMPARE AND WRITE found different data (SBC-4 5.3): nothing was written.
 * `offset` is the byte offset, within the compared range (and so within the
 * `expected` buffer), of the first byte that differed: the sense INFORMATION field.
 */
export class MiscompareError extends RblkError {
  readonly offset: number;

  constructor(message: string, offset: number, details: RblkErrorDetails) {
    super('MISCOMPARE', message, details);
    this.name = 'MiscompareError';
    this.offset = offset;
  }
}

/** True for an error that carries one of the given codes. */
export function hasCode(e: unknown, ...codes: RblkErrorCode[]): e is RblkError {
  return e instanceof RblkError && codes.includes(e.code);
}

/**
 * The code for a CHECK CONDITION, by sense key and additional sense code
 * (SPC-5 4.4.4 and annex D; the target produces them in target/scsi/sense-map.ts).
 */
function codeForSense(s: Sense): RblkErrorCode {
  switch (s.key) {
    case SenseKey.ILLEGAL_REQUEST:
      if (s.asc === 0x21) return 'LBA_OUT_OF_RANGE';
      if (s.asc === 0x20) return 'NOT_SUPPORTED';
      // 25/00: the LUN is gone (unexported under us); to a filesystem that is an I/O error.
      if (s.asc === 0x25) return 'IO_ERROR';
      return 'INVALID';
    case SenseKey.DATA_PROTECT:
      // 27/07 SPACE ALLOCATION FAILED WRITE PROTECT: a thin volume is full (SBC-4 4.7.3.7).
      return s.asc === 0x27 && s.ascq === 0x07 ? 'NO_SPACE' : 'WRITE_PROTECTED';
    case SenseKey.MEDIUM_ERROR:
      return 'MEDIUM_ERROR';
    case SenseKey.MISCOMPARE:
      return 'MISCOMPARE';
    case SenseKey.ABORTED_COMMAND:
      return 'ABORTED';
    case SenseKey.VOLUME_OVERFLOW:
      return 'NO_SPACE';
    default:
      return 'IO_ERROR';
  }
}

/** The error for a command that ended with a status other than GOOD. */
export function errorForStatus(what: string, status: number, senseBytes: Buffer): RblkError {
  switch (status) {
    case ScsiStatus.RESERVATION_CONFLICT:
      return new RblkError('RESERVATION_CONFLICT', `${what}: RESERVATION CONFLICT`, { status });
    case ScsiStatus.BUSY:
    case ScsiStatus.TASK_SET_FULL:
      return new RblkError('BUSY', `${what}: the target stayed ${statusName(status).replace(/_/g, ' ')}`, { status });
    case ScsiStatus.TASK_ABORTED:
      return new RblkError('ABORTED', `${what}: TASK ABORTED`, { status });
    case ScsiStatus.CHECK_CONDITION: {
      const sense = decodeSense(senseBytes);
      if (sense === undefined) return new RblkError('IO_ERROR', `${what}: CHECK CONDITION without usable sense data`, { status });
      const message = `${what}: ${describeSense(sense)}`;
      const code = codeForSense(sense);
      if (code === 'MISCOMPARE') return new MiscompareError(message, Number(sense.information ?? -1n), { status, sense });
      return new RblkError(code, message, { status, sense });
    }
    default:
      return new RblkError('IO_ERROR', `${what}: unexpected SCSI status ${statusName(status)}`, { status });
  }
}
