// iSCSI PDU layout (RFC 7143 §11): the 48-byte Basic Header Segment, read in
// place from the receive buffer (no copy, no object per field), and the
// target's PDUs built into one 48-byte header each. All fields are
// big-endian. What each opcode's fields mean is in docs/iscsi.md.

export const BHS_LENGTH = 48;
/** Initiator Task Tag / Target Transfer Tag "reserved" value (RFC 7143 §11.18.3). */
export const RESERVED_TAG = 0xffffffff;

/** Initiator opcodes (RFC 7143 §11.1.1). */
export const Op = {
  NOP_OUT: 0x00,
  SCSI_COMMAND: 0x01,
  TASK_MGMT: 0x02,
  LOGIN: 0x03,
  TEXT: 0x04,
  DATA_OUT: 0x05,
  LOGOUT: 0x06,
  SNACK: 0x10,
} as const;

/** Target opcodes. */
export const TOp = {
  NOP_IN: 0x20,
  SCSI_RESPONSE: 0x21,
  TASK_MGMT_RESPONSE: 0x22,
  LOGIN_RESPONSE: 0x23,
  TEXT_RESPONSE: 0x24,
  DATA_IN: 0x25,
  LOGOUT_RESPONSE: 0x26,
  R2T: 0x31,
  ASYNC: 0x32,
  REJECT: 0x3f,
} as const;

/** Reject reasons (RFC 7143 §11.17.1). */
export const RejectReason = {
  DATA_DIGEST: 0x02,
  SNACK_REJECT: 0x03,
  PROTOCOL_ERROR: 0x04,
  COMMAND_NOT_SUPPORTED: 0x05,
  IMMEDIATE_REJECTED: 0x06,
  TASK_IN_PROGRESS: 0x07,
  INVALID_DATA_ACK: 0x08,
  INVALID_PDU_FIELD: 0x09,
  OUT_OF_RESOURCES: 0x0a,
  WAITING_FOR_LOGOUT: 0x0c,
} as const;

/** Login status class and detail (RFC 7143 §11.13.5), as class << 8 | detail. */
export const LoginStatus = {
  SUCCESS: 0x0000,
  TARGET_MOVED_TEMPORARILY: 0x0101,
  INITIATOR_ERROR: 0x0200,
  AUTH_FAILURE: 0x0201,
  AUTHORIZATION_FAILURE: 0x0202,
  NOT_FOUND: 0x0203,
  TARGET_REMOVED: 0x0204,
  UNSUPPORTED_VERSION: 0x0205,
  TOO_MANY_CONNECTIONS: 0x0206,
  MISSING_PARAMETER: 0x0207,
  CANT_INCLUDE_IN_SESSION: 0x0208,
  SESSION_TYPE_NOT_SUPPORTED: 0x0209,
  SESSION_DOES_NOT_EXIST: 0x020a,
  INVALID_DURING_LOGIN: 0x020b,
  TARGET_ERROR: 0x0300,
  SERVICE_UNAVAILABLE: 0x0301,
  OUT_OF_RESOURCES: 0x0302,
} as const;

/** Task management functions (RFC 7143 §11.5.1) and responses (§11.6.1). */
export const TmfFunction = {
  ABORT_TASK: 1,
  ABORT_TASK_SET: 2,
  CLEAR_ACA: 3,
  CLEAR_TASK_SET: 4,
  LOGICAL_UNIT_RESET: 5,
  TARGET_WARM_RESET: 6,
  TARGET_COLD_RESET: 7,
  TASK_REASSIGN: 8,
} as const;

export const TmfResponse = {
  COMPLETE: 0,
  NO_TASK: 1,
  NO_LUN: 2,
  TASK_ALLEGIANT: 3,
  NO_REASSIGNMENT: 4,
  NOT_SUPPORTED: 5,
  AUTHORIZATION_FAILED: 6,
  REJECTED: 255,
} as const;

// Byte 0 and 1.
export const opcodeOf = (h: Buffer): number => h[0] & 0x3f;
export const isImmediate = (h: Buffer): boolean => (h[0] & 0x40) !== 0;
export const FINAL = 0x80;
/** The C bit of Login and Text PDUs: the text goes on in the next PDU (RFC 7143 §11.10.2, §11.11.2). */
export const CONTINUE = 0x40;
export const isFinal = (h: Buffer): boolean => (h[1] & FINAL) !== 0;
/** TotalAHSLength in bytes (byte 4 counts 4-byte words). */
export const ahsLengthOf = (h: Buffer): number => h[4] * 4;
export const dataLengthOf = (h: Buffer): number => (h[5] << 16) | (h[6] << 8) | h[7];
export const ittOf = (h: Buffer): number => h.readUInt32BE(16);
export const word = (h: Buffer, at: number): number => h.readUInt32BE(at);

/**
 * The LUN field (SAM-5 4.7): single-level peripheral (00 nn) and flat
 * (01 nn nn) addressing of the first level; anything else is a LUN no volume
 * has (-1), which answers as an unmapped LUN.
 */
export function lunOf(h: Buffer): number {
  const method = h[8] >> 6;
  if (method === 0 && h[8] === 0) return h[9];
  if (method === 1) return ((h[8] & 0x3f) << 8) | h[9];
  return -1;
}

/** The LUN field for a target PDU: single-level peripheral below 256, flat above. */
export function writeLun(h: Buffer, lun: number): void {
  if (lun < 256) {
    h[8] = 0;
    h[9] = lun;
  } else {
    h[8] = 0x40 | ((lun >> 8) & 0x3f);
    h[9] = lun & 0xff;
  }
}

/** A zeroed header for a target PDU with its opcode, flags and data segment length. */
export function header(op: number, flags: number, dataLength: number): Buffer {
  const h = Buffer.allocUnsafe(BHS_LENGTH).fill(0);
  h[0] = op;
  h[1] = flags;
  h[5] = (dataLength >> 16) & 0xff;
  h[6] = (dataLength >> 8) & 0xff;
  h[7] = dataLength & 0xff;
  return h;
}

/** Pad bytes after a data segment of n bytes (RFC 7143 §11.2: to a 4-byte boundary). */
export const padOf = (n: number): number => (4 - (n & 3)) & 3;

/** Serial number arithmetic over 32 bits (RFC 1982), as CmdSN and StatSN use it (RFC 7143 §4.2.2.1). */
export function snLess(a: number, b: number): boolean {
  return a !== b && ((a < b && b - a < 0x80000000) || (a > b && a - b > 0x80000000));
}
export const snAdd = (a: number, n: number): number => (a + n) >>> 0;
