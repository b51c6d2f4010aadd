// Numbers of the rblk wire protocol, versions 1 to 5 (docs/protocol.md is normative).
// Opcodes and code points reuse SRP's where SRP has the same thing (T10 SRP r16a 5,
// Linux include/scsi/srp.h), so a trace reads like an SRP trace.

type ValueOf<T> = T[keyof T];

/**
 * The highest protocol version this code speaks; it speaks every version from
 * MIN_PROTOCOL_VERSION up. A connection's version is chosen by its CONNECT
 * and echoed by the ACCEPT (docs/protocol.md §3).
 */
export const PROTOCOL_VERSION = 5;
export const MIN_PROTOCOL_VERSION = 1;
/**
 * From this protocol version on, the target may complete a GOOD read with an
 * RDMA WRITE carrying remote CQ data instead of an RSP (docs/protocol.md §12.1).
 */
export const REMOTE_DATA_VERSION = 2;
/**
 * From this protocol version on, the initiator may fence a lost connection of
 * its own through another one (TSK_MGMT FENCE CONNECTION, docs/protocol.md
 * §14.1) before it reissues that connection's commands.
 */
export const FENCE_VERSION = 3;
/**
 * From this protocol version on, the initiator may ask a gateway to fence
 * another gateway of the same volume (TSK_MGMT FENCE GATEWAY, docs/protocol.md
 * §14.1) before it reissues there the commands it lost on that one.
 */
export const GATEWAY_FENCE_VERSION = 4;
/**
 * From this protocol version on, the initiator may send several CMD capsules
 * in one message, a train (docs/protocol.md §5.1), so that a burst of commands
 * costs one send instead of one each.
 */
export const TRAIN_VERSION = 5;
/** The version byte of every capsule header: the capsule format, which versions 2 to 5 did not change (§5). */
export const CAPSULE_VERSION = 1;

/** The name rblkd answers to when its config names none; initiators use it by default. */
export const DEFAULT_TARGET_NAME = 'iqn.2026-11.io.rblk:target';

/** The port rblkd's rblk listeners take and initiators dial unless told otherwise. */
export const RBLK_PORT = 7471;

/** Every capsule starts with this header: opcode, version, flags, length, tag. */
export const HEADER_SIZE = 16;

/** Receive buffers on both sides are at least this large: a LOGIN_REQ with two longest names fits. */
export const MIN_CAPSULE_SIZE = 512;
export const MAX_CAPSULE_SIZE = 1 << 20;

export const MAX_QUEUE_DEPTH = 4096;
/** Receive buffers each side keeps for capsules that cost no credit (protocol.md "Credits"). */
export const CONTROL_RECV_BUFFERS = 3;

export const MAX_DESCRIPTORS = 255;
export const DESCRIPTOR_SIZE = 24;
export const CDB_SIZE = 16;
export const LUN_SIZE = 8;
/** Peripheral addressing covers 0-255, flat space addressing 256-16383 (SAM-5 4.7.7). */
export const MAX_LUN = 16383;
/** The iSCSI name limit (RFC 7143 6.1), applied to both names. */
export const MAX_NAME_LENGTH = 223;
export const NONCE_SIZE = 32;
export const MAC_SIZE = 32;
/** SPC-5 4.4.1: the largest sense data (ADDITIONAL SENSE LENGTH 244 + 8). */
export const MAX_SENSE_LENGTH = 252;
export const MIN_KEEPALIVE_MS = 100;
export const MAX_KEEPALIVE_MS = 3_600_000;
export const MAX_TRANSFER_LENGTH = 0xffffffff;

/** Well within the 56 bytes of private data RDMA/CM carries in a connect request. */
export const CONNECT_DATA_SIZE = 16;
/** "RBLK" in ASCII. */
export const CONNECT_MAGIC = 0x52424c4b;

/**
 * SRP's opcode ranges: 0x00-0x3F initiator requests, 0x40-0x7F initiator answers to the target,
 * 0x80-0xBF target requests, 0xC0-0xFF target answers. Bit 7 therefore names the sender.
 */
export const Opcode = {
  LOGIN_REQ: 0x00,
  TSK_MGMT: 0x01,
  CMD: 0x02,
  I_LOGOUT: 0x03,
  LOGIN_AUTH: 0x04,
  KEEPALIVE: 0x05,
  CRED_RSP: 0x41,
  T_LOGOUT: 0x80,
  CRED_REQ: 0x81,
  LOGIN_RSP: 0xc0,
  RSP: 0xc1,
  LOGIN_REJ: 0xc2,
  LOGIN_CHALLENGE: 0xc3,
  TSK_RSP: 0xc4,
  KEEPALIVE_RSP: 0xc5,
} as const;
export type Opcode = ValueOf<typeof Opcode>;

const opcodeNames = new Map<number, string>(Object.entries(Opcode).map(([name, op]) => [op, name]));

export function isOpcode(op: number): op is Opcode {
  return opcodeNames.has(op);
}

export function opcodeName(op: number): string {
  return opcodeNames.get(op) ?? `0x${op.toString(16).padStart(2, '0')}`;
}

export type Sender = 'initiator' | 'target';

export function senderOf(op: Opcode): Sender {
  return (op & 0x80) === 0 ? 'initiator' : 'target';
}

/**
 * Byte offsets of the fields the native fast path and initiator queue read and
 * write as well (native/src/core/wire-layout.h is generated from these, docs/protocol.md
 * "Common header", "CMD" and "RSP"); all big-endian.
 */
export const HeaderField = { OPCODE: 0, VERSION: 1, FLAGS: 2, LENGTH: 4, TAG: 8 } as const;
export const CmdField = { LUN: 16, TASK_ATTRIBUTE: 24, DIRECTION: 25, FORMAT: 26, DESCRIPTOR_COUNT: 27, DATA_LENGTH: 28, CDB: 32, DATA: 48 } as const;
export const DescriptorField = { ADDRESS: 0, KEY: 8, LENGTH: 16, RESERVED: 20 } as const;
export const RspField = { CREDIT_DELTA: 16, STATUS: 20, RESERVED: 21, SENSE_LENGTH: 22, DATA_OUT_RESIDUAL: 24, DATA_IN_RESIDUAL: 28, SENSE: 32 } as const;

/** Byte sizes of the fixed parts; variable parts follow them. */
export const CapsuleSize = {
  HEADER_ONLY: HEADER_SIZE,
  LOGIN_REQ_FIXED: 32,
  LOGIN_CHALLENGE: 56,
  LOGIN_AUTH: 88,
  LOGIN_RSP: 80,
  LOGIN_REJ: 24,
  CMD_FIXED: 48,
  RSP_FIXED: 32,
  TSK_MGMT: 40,
  TSK_RSP: 24,
  T_LOGOUT: 24,
  CRED_REQ: 24,
} as const;

export const LoginRequestFlags = {
  /** The initiator insists on mutual authentication; the target must challenge or reject. */
  AUTH_REQUIRED: 0x0001,
} as const;

export const LoginResponseFlags = {
  /** The login was authenticated and the target's proof field is valid. */
  AUTHENTICATED: 0x0001,
} as const;

/** SRP_RSP flags (SRP r16a 6.9), without RSPVALID: task management has its own TSK_RSP. */
export const ResponseFlags = {
  SNSVALID: 0x02,
  DOOVER: 0x04,
  DOUNDER: 0x08,
  DIOVER: 0x10,
  DIUNDER: 0x20,
} as const;

export const AuthAlgorithm = {
  HMAC_SHA256: 1,
} as const;

/** SAM-5 8.6 task attributes, with SRP's encoding. */
export const TaskAttribute = {
  SIMPLE: 0,
  HEAD_OF_QUEUE: 1,
  ORDERED: 2,
  ACA: 4,
} as const;
export type TaskAttribute = ValueOf<typeof TaskAttribute>;

export const DataDirection = {
  NONE: 0,
  /** Data-out: the target RDMA-READs it from the initiator (or finds it in the capsule). */
  WRITE: 1,
  /** Data-in: the target RDMA-WRITEs it into the initiator's memory. */
  READ: 2,
} as const;
export type DataDirection = ValueOf<typeof DataDirection>;

export const DataFormat = {
  NONE: 0,
  DIRECT: 1,
  LIST: 2,
  IMMEDIATE: 3,
} as const;
export type DataFormat = ValueOf<typeof DataFormat>;

/** SRP_TSK_MGMT function codes (SRP r16a 6.7); the target answers 04 and 40 with NOT_SUPPORTED. */
export const TaskFunction = {
  ABORT_TASK: 0x01,
  ABORT_TASK_SET: 0x02,
  CLEAR_TASK_SET: 0x04,
  LUN_RESET: 0x08,
  CLEAR_ACA: 0x40,
  /**
   * rblk's, version 3 on (vendor specific: SRP defines none at 0x80): ends
   * another connection of the same initiator, named by its LOGIN_RSP session
   * id in the task tag field, and fences its commands (docs/protocol.md §14.1).
   */
  FENCE_CONNECTION: 0x80,
  /**
   * rblk's, version 4 on: fences another gateway of the LUN's volume, named by
   * its target port group in the task tag field, out of the store they share
   * (docs/protocol.md §14.1).
   */
  FENCE_GATEWAY: 0x81,
} as const;
export type TaskFunction = ValueOf<typeof TaskFunction>;

/** SRP response codes for task management (SRP r16a 6.9), plus SAM-5's INCORRECT LUN. */
export const TaskResponse = {
  COMPLETE: 0x00,
  NOT_SUPPORTED: 0x04,
  FAILED: 0x05,
  INCORRECT_LUN: 0x09,
} as const;
export type TaskResponse = ValueOf<typeof TaskResponse>;

/** SRP_LOGIN_REJ reasons (SRP r16a 6.4) with rblk's own from 0x00010010. */
export const LoginRejectReason = {
  UNABLE: 0x00010000,
  NO_RESOURCES: 0x00010001,
  CAPSULE_TOO_LARGE: 0x00010002,
  UNABLE_TO_ASSOCIATE: 0x00010003,
  UNSUPPORTED_FORMAT: 0x00010004,
  AUTH_FAILED: 0x00010010,
  ACCESS_DENIED: 0x00010011,
  UNSUPPORTED_VERSION: 0x00010012,
  SHUTTING_DOWN: 0x00010013,
  PROTOCOL_ERROR: 0x00010014,
} as const;
export type LoginRejectReason = ValueOf<typeof LoginRejectReason>;

/** T_LOGOUT reasons; 0-3 keep SRP's meanings (SRP r16a 6.8). */
export const LogoutReason = {
  NONE: 0,
  INACTIVE: 1,
  PROTOCOL_ERROR: 2,
  UNEXPECTED_CAPSULE: 3,
  CREDIT_OVERRUN: 4,
  SHUTDOWN: 5,
  ADMIN: 6,
} as const;
export type LogoutReason = ValueOf<typeof LogoutReason>;

export const ConnectKind = {
  CONNECT: 1,
  ACCEPT: 2,
  REJECT: 3,
} as const;
export type ConnectKind = ValueOf<typeof ConnectKind>;

export const ConnectRejectReason = {
  UNSUPPORTED_VERSION: 1,
  BAD_PRIVATE_DATA: 2,
  NO_RESOURCES: 3,
  CAPSULE_SIZE: 4,
  QUEUE_DEPTH: 5,
  SHUTTING_DOWN: 6,
} as const;
export type ConnectRejectReason = ValueOf<typeof ConnectRejectReason>;

/** A type guard for one of the code tables above, built once so checking a capsule allocates nothing. */
export function valueGuard<T extends Record<string, number>>(table: T): (value: number) => value is ValueOf<T> {
  const values = new Set<number>(Object.values(table));
  return (value: number): value is ValueOf<T> => values.has(value);
}
