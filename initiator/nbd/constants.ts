// NBD wire constants, as numbered in NetworkBlockDevice/nbd doc/proto.md
// ("Values"). Everything on the wire is big-endian.

/** Handshake: the server's first 8 bytes ("NBDMAGIC"). */
export const NBD_MAGIC = 0x4e42444d41474943n;
/** Handshake: newstyle magic, and the prefix of every client option ("IHAVEOPT"). */
export const IHAVEOPT = 0x49484156454f5054n;
/** Prefix of every option reply in fixed newstyle negotiation. */
export const OPTION_REPLY_MAGIC = 0x3e889045565a9n;
export const REQUEST_MAGIC = 0x25609513;
export const SIMPLE_REPLY_MAGIC = 0x67446698;
export const STRUCTURED_REPLY_MAGIC = 0x668e33ef;

/** Handshake flags the server sends (proto.md "Handshake flags"). */
export const HandshakeFlag = {
  FIXED_NEWSTYLE: 1 << 0,
  NO_ZEROES: 1 << 1,
} as const;

/** Client flags (proto.md "Client flags"); any other bit ends the session. */
export const ClientFlag = {
  FIXED_NEWSTYLE: 1 << 0,
  NO_ZEROES: 1 << 1,
} as const;

export const Option = {
  EXPORT_NAME: 1,
  ABORT: 2,
  LIST: 3,
  STARTTLS: 5,
  INFO: 6,
  GO: 7,
  STRUCTURED_REPLY: 8,
  LIST_META_CONTEXT: 9,
  SET_META_CONTEXT: 10,
} as const;

export const OptionReply = {
  ACK: 1,
  SERVER: 2,
  INFO: 3,
  META_CONTEXT: 4,
  ERR_UNSUP: 0x80000001,
  ERR_POLICY: 0x80000002,
  ERR_INVALID: 0x80000003,
  ERR_PLATFORM: 0x80000004,
  ERR_TLS_REQD: 0x80000005,
  ERR_UNKNOWN: 0x80000006,
  ERR_SHUTDOWN: 0x80000007,
  ERR_BLOCK_SIZE_REQD: 0x80000008,
  ERR_TOO_BIG: 0x80000009,
} as const;

/** NBD_INFO_* items inside NBD_REP_INFO. */
export const Info = {
  EXPORT: 0,
  NAME: 1,
  DESCRIPTION: 2,
  BLOCK_SIZE: 3,
} as const;

export const TransmissionFlag = {
  HAS_FLAGS: 1 << 0,
  READ_ONLY: 1 << 1,
  SEND_FLUSH: 1 << 2,
  SEND_FUA: 1 << 3,
  ROTATIONAL: 1 << 4,
  SEND_TRIM: 1 << 5,
  SEND_WRITE_ZEROES: 1 << 6,
  SEND_DF: 1 << 7,
  CAN_MULTI_CONN: 1 << 8,
  SEND_CACHE: 1 << 10,
  SEND_FAST_ZERO: 1 << 11,
} as const;

export const Command = {
  READ: 0,
  WRITE: 1,
  DISC: 2,
  FLUSH: 3,
  TRIM: 4,
  CACHE: 5,
  WRITE_ZEROES: 6,
  BLOCK_STATUS: 7,
} as const;

export const CommandFlag = {
  FUA: 1 << 0,
  NO_HOLE: 1 << 1,
  DF: 1 << 2,
  REQ_ONE: 1 << 3,
  FAST_ZERO: 1 << 4,
} as const;

/** NBD_STATE_* bits of a base:allocation descriptor (proto.md "base:allocation metadata context"). */
export const AllocationState = {
  HOLE: 1 << 0,
  ZERO: 1 << 1,
} as const;

/** The one metadata context offered, and the id its descriptors carry. */
export const BASE_ALLOCATION = 'base:allocation';
export const BASE_ALLOCATION_ID = 1;

export const ReplyFlag = {
  DONE: 1 << 0,
} as const;

export const ReplyType = {
  NONE: 0,
  OFFSET_DATA: 1,
  OFFSET_HOLE: 2,
  BLOCK_STATUS: 5,
  ERROR: 0x8001,
  ERROR_OFFSET: 0x8002,
} as const;

/** The only error values a reply may carry (proto.md "Error values"). */
export const Errno = {
  EPERM: 1,
  EIO: 5,
  ENOMEM: 12,
  EINVAL: 22,
  ENOSPC: 28,
  EOVERFLOW: 75,
  ENOTSUP: 95,
  ESHUTDOWN: 108,
} as const;
export type NbdErrno = (typeof Errno)[keyof typeof Errno];

/** IANA port for newstyle negotiation. */
export const DEFAULT_PORT = 10809;
export const REQUEST_HEADER_SIZE = 28;
export const OPTION_HEADER_SIZE = 16;
/** proto.md "Conventions": strings (export names, messages) MUST be at most 4096 bytes. */
export const MAX_STRING = 4096;
/**
 * Largest option payload read into memory. NBD_OPT_GO with a 4096-byte name
 * and every info type fits many times over; longer options are skipped
 * unread and answered with NBD_REP_ERR_TOO_BIG.
 */
export const MAX_OPTION_DATA = 16 * 1024;
/**
 * Largest payload advertised. proto.md "Size constraints": clients keep to
 * 2^25 bytes by default, and no payload up to that counts as abuse.
 */
export const MAX_PAYLOAD_CAP = 32 * 1024 * 1024;
/** Requests one connection may have between being read and their reply leaving. */
export const DEFAULT_MAX_IN_FLIGHT = 64;
/**
 * Payload bytes (write data held, read data awaiting the socket) one
 * connection may pin. A lone request is always admitted, so one 32 MiB
 * request still runs.
 */
export const MAX_IN_FLIGHT_BYTES = 64 * 1024 * 1024;
