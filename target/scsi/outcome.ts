// What a command handler returns: GOOD with a data-in length, CHECK CONDITION
// with sense, or a bare status (RESERVATION CONFLICT, BUSY). Handlers return
// these values; they never throw for a SCSI error. The command lifecycle turns
// an Outcome into the Completion the front end sends.
import { ScsiStatus } from '../../protocol/scsi/status.js';
import {
  INVALID_FIELD_IN_CDB,
  INVALID_FIELD_IN_PARAMETER_LIST,
  type SenseCode,
} from '../../protocol/scsi/sense-codes.js';
import type { FieldPointer } from '../../protocol/scsi/sense.js';

export interface Good {
  readonly kind: 'good';
  readonly dataLength: number;
  /** GOOD unless a command completes with CONDITION MET. */
  readonly status?: number;
}

export interface Failure {
  readonly kind: 'check';
  readonly code: SenseCode;
  readonly information?: number | bigint;
  readonly fieldPointer?: FieldPointer;
}

export interface StatusOnly {
  readonly kind: 'status';
  readonly status: number;
}

export type Outcome = Good | Failure | StatusOnly;

export function good(dataLength = 0): Good {
  return { kind: 'good', dataLength };
}

export function check(code: SenseCode, extra: { information?: number | bigint; fieldPointer?: FieldPointer } = {}): Failure {
  return { kind: 'check', code, ...extra };
}

/** 05 24/00 pointing at the offending CDB byte (and bit), SPC-5 4.4.2.2. */
export function invalidCdb(byte: number, bit?: number): Failure {
  return check(INVALID_FIELD_IN_CDB, { fieldPointer: { inCdb: true, byte, ...(bit === undefined ? {} : { bit }) } });
}

/** 05 26/00 pointing at the offending parameter-list byte (and bit). */
export function invalidParameter(byte: number, bit?: number): Failure {
  return check(INVALID_FIELD_IN_PARAMETER_LIST, {
    fieldPointer: { inCdb: false, byte, ...(bit === undefined ? {} : { bit }) },
  });
}

export const RESERVATION_CONFLICT: StatusOnly = Object.freeze({
  kind: 'status',
  status: ScsiStatus.RESERVATION_CONFLICT,
});

export const BUSY: StatusOnly = Object.freeze({ kind: 'status', status: ScsiStatus.BUSY });
/** A command of a lost connection that never reached the backend (range-lock.ts fence). */
export const TASK_ABORTED: StatusOnly = Object.freeze({ kind: 'status', status: ScsiStatus.TASK_ABORTED });

export function isFailure(x: unknown): x is Failure {
  return typeof x === 'object' && x !== null && (x as { kind?: unknown }).kind === 'check';
}

/** Copies a built response into the data-in buffer, cut to the allocation length (SPC-5 4.2.5.6). */
export function respond(data: Buffer, response: Buffer, allocationLength: number): Good {
  const n = Math.min(response.length, allocationLength, data.length);
  response.copy(data, 0, 0, n);
  return good(n);
}
