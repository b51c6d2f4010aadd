// RSP: the completion of one CMD (protocol.md "RSP"), after SRP_RSP (SRP r16a 6.9): status,
// sense data, residuals and the credits the target returns.
//   16 credit delta u32 | 20 status u8 | 21 reserved | 22 sense length u16
//   24 data-out residual u32 | 28 data-in residual u32 | 32 sense data

import { CapsuleSize, MAX_SENSE_LENGTH, Opcode, ResponseFlags, RspField } from './constants.js';
import { fail } from './errors.js';
import { checkCreditDelta, checkRange, exactLength, hex, requireFlags, requireZero, U32_MAX } from './fields.js';
import { PROTOCOL_LIMITS, readHeaderOf, writeHeader, type CapsuleHeader, type WireLimits } from './header.js';

/** Underflow: fewer bytes moved than the buffer holds; overflow: the command wanted more (SAM-5 5.5). */
export interface Residual {
  kind: 'under' | 'over';
  count: number;
}

export interface ResponseCapsule {
  op: typeof Opcode.RSP;
  /** The CMD's tag. */
  tag: bigint;
  creditDelta: number;
  /** SCSI status (SAM-5 5.3.1). */
  status: number;
  /** Sense data, 0 to 252 bytes; empty when there is none. */
  sense: Buffer;
  dataOutResidual: Residual | null;
  dataInResidual: Residual | null;
}

/** GOOD, CHECK CONDITION, CONDITION MET, BUSY, RESERVATION CONFLICT, TASK SET FULL, ACA ACTIVE, TASK ABORTED. */
const SCSI_STATUSES = new Set([0x00, 0x02, 0x04, 0x08, 0x18, 0x28, 0x30, 0x40]);
const ALL_FLAGS =
  ResponseFlags.SNSVALID | ResponseFlags.DOOVER | ResponseFlags.DOUNDER | ResponseFlags.DIOVER | ResponseFlags.DIUNDER;

function checkStatus(status: number): void {
  if (!SCSI_STATUSES.has(status)) fail('BAD_FIELD', `RSP: ${hex(status)} is not a SCSI status`);
}

/** SPC-5 4.4: response codes 70h/71h (fixed) and 72h/73h (descriptor), VALID bit aside. */
function checkSense(sense: Buffer): void {
  if (sense.length === 0) return;
  const code = sense[0] & 0x7f;
  if (code < 0x70 || code > 0x73) fail('BAD_FIELD', `RSP: sense response code ${hex(sense[0])} is not 70h-73h`);
}

function residualFlags(r: Residual | null, over: number, under: number, what: string): number {
  if (r === null) return 0;
  checkRange(r.count, 1, U32_MAX, `RSP: ${what} residual`);
  if (r.kind === 'over') return over;
  if (r.kind === 'under') return under;
  fail('BAD_FIELD', `RSP: ${what} residual kind must be 'under' or 'over'`);
}

function readResidual(flags: number, over: number, under: number, count: number, what: string): Residual | null {
  const isOver = (flags & over) !== 0;
  const isUnder = (flags & under) !== 0;
  if (isOver && isUnder) fail('BAD_FIELD', `RSP: ${what} residual is flagged both over and under`);
  if (!isOver && !isUnder) {
    if (count !== 0) fail('BAD_FIELD', `RSP: ${what} residual count ${count} without an over/under flag`);
    return null;
  }
  if (count === 0) fail('BAD_FIELD', `RSP: ${what} residual flagged with count 0`);
  return { kind: isOver ? 'over' : 'under', count };
}

export function responseLength(rsp: ResponseCapsule): number {
  return CapsuleSize.RSP_FIXED + rsp.sense.length;
}

export function encodeResponse(buf: Buffer, rsp: ResponseCapsule): number {
  checkCreditDelta(rsp.creditDelta, 'RSP');
  checkStatus(rsp.status);
  if (!Buffer.isBuffer(rsp.sense)) fail('BAD_FIELD', 'RSP: sense must be a Buffer');
  checkRange(rsp.sense.length, 0, MAX_SENSE_LENGTH, 'RSP: sense length', 'OVERSIZE');
  checkSense(rsp.sense);
  const flags =
    (rsp.sense.length > 0 ? ResponseFlags.SNSVALID : 0) |
    residualFlags(rsp.dataOutResidual, ResponseFlags.DOOVER, ResponseFlags.DOUNDER, 'data-out') |
    residualFlags(rsp.dataInResidual, ResponseFlags.DIOVER, ResponseFlags.DIUNDER, 'data-in');
  const length = responseLength(rsp);
  writeHeader(buf, Opcode.RSP, flags, length, rsp.tag);
  buf.writeUInt32BE(rsp.creditDelta, RspField.CREDIT_DELTA);
  buf[RspField.STATUS] = rsp.status;
  buf[RspField.RESERVED] = 0;
  buf.writeUInt16BE(rsp.sense.length, RspField.SENSE_LENGTH);
  buf.writeUInt32BE(rsp.dataOutResidual?.count ?? 0, RspField.DATA_OUT_RESIDUAL);
  buf.writeUInt32BE(rsp.dataInResidual?.count ?? 0, RspField.DATA_IN_RESIDUAL);
  rsp.sense.copy(buf, CapsuleSize.RSP_FIXED);
  return length;
}

export function readResponse(buf: Buffer, header: CapsuleHeader): ResponseCapsule {
  requireFlags(header.flags, ALL_FLAGS, 'RSP');
  if (buf.length < CapsuleSize.RSP_FIXED) fail('TRUNCATED', `RSP needs at least ${CapsuleSize.RSP_FIXED} bytes, got ${buf.length}`);
  const creditDelta = buf.readUInt32BE(RspField.CREDIT_DELTA);
  checkCreditDelta(creditDelta, 'RSP');
  const status = buf[RspField.STATUS];
  checkStatus(status);
  requireZero(buf, RspField.RESERVED, RspField.SENSE_LENGTH, 'RSP');
  const senseLength = buf.readUInt16BE(RspField.SENSE_LENGTH);
  if (senseLength > MAX_SENSE_LENGTH) fail('OVERSIZE', `RSP: sense length ${senseLength}, the limit is ${MAX_SENSE_LENGTH}`);
  const senseValid = (header.flags & ResponseFlags.SNSVALID) !== 0;
  if (senseValid !== senseLength > 0) fail('BAD_FIELD', `RSP: SNSVALID is ${senseValid ? 'set' : 'clear'} with sense length ${senseLength}`);
  exactLength(buf, CapsuleSize.RSP_FIXED + senseLength, 'RSP with its sense data');
  const sense = buf.subarray(CapsuleSize.RSP_FIXED, CapsuleSize.RSP_FIXED + senseLength);
  checkSense(sense);
  return {
    op: Opcode.RSP,
    tag: header.tag,
    creditDelta,
    status,
    sense,
    dataOutResidual: readResidual(header.flags, ResponseFlags.DOOVER, ResponseFlags.DOUNDER, buf.readUInt32BE(RspField.DATA_OUT_RESIDUAL), 'data-out'),
    dataInResidual: readResidual(header.flags, ResponseFlags.DIOVER, ResponseFlags.DIUNDER, buf.readUInt32BE(RspField.DATA_IN_RESIDUAL), 'data-in'),
  };
}

export function decodeResponse(buf: Buffer, limits: WireLimits = PROTOCOL_LIMITS): ResponseCapsule {
  return readResponse(buf, readHeaderOf(buf, Opcode.RSP, limits));
}
