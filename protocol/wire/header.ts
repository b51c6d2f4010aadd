// The 16-byte header that starts every capsule (protocol.md "Common header"):
//   0 opcode u8 | 1 version u8 | 2 flags u16 | 4 length u32 | 8 tag u64, all big-endian.

import {
  HEADER_SIZE,
  HeaderField,
  MAX_CAPSULE_SIZE,
  MAX_DESCRIPTORS,
  MAX_TRANSFER_LENGTH,
  CAPSULE_VERSION,
  CapsuleSize,
  isOpcode,
  opcodeName,
  senderOf,
  type Opcode,
  type Sender,
} from './constants.js';
import { fail } from './errors.js';
import { checkRange, checkU64, ensureCapacity, hex, U16_MAX } from './fields.js';

export interface CapsuleHeader {
  op: Opcode;
  flags: number;
  /** The whole capsule's length in bytes, header included. */
  length: number;
  tag: bigint;
}

/** What the receiving side accepts; before login, the protocol maxima. */
export interface WireLimits {
  /** The largest capsule this side receives: its receive buffer size, as negotiated. */
  maxCapsule: number;
  /** Largest immediate (in-capsule) write data in a CMD. */
  maxImmediate: number;
  maxDescriptors: number;
  /** Largest total data length of one CMD. */
  maxTransfer: number;
}

export const PROTOCOL_LIMITS: Readonly<WireLimits> = Object.freeze({
  maxCapsule: MAX_CAPSULE_SIZE,
  maxImmediate: MAX_CAPSULE_SIZE - CapsuleSize.CMD_FIXED,
  maxDescriptors: MAX_DESCRIPTORS,
  maxTransfer: MAX_TRANSFER_LENGTH,
});

export function writeHeader(buf: Buffer, op: Opcode, flags: number, length: number, tag: bigint): void {
  ensureCapacity(buf, length, opcodeName(op));
  checkRange(flags, 0, U16_MAX, `${opcodeName(op)}: flags`);
  checkU64(tag, `${opcodeName(op)}: tag`);
  buf[HeaderField.OPCODE] = op;
  buf[HeaderField.VERSION] = CAPSULE_VERSION;
  buf.writeUInt16BE(flags, HeaderField.FLAGS);
  buf.writeUInt32BE(length, HeaderField.LENGTH);
  buf.writeBigUInt64BE(tag, HeaderField.TAG);
}

/**
 * Checks, in this order: enough bytes for a header, the receiver's size limit, version, opcode
 * (and, given `from`, that this sender may send it), and that the length field equals the
 * number of bytes received. Bodies are checked by the opcode's own decoder.
 */
export function readHeader(buf: Buffer, limits: WireLimits, from?: Sender): CapsuleHeader {
  if (!Buffer.isBuffer(buf)) fail('TRUNCATED', 'capsule is not a Buffer');
  if (buf.length < HEADER_SIZE) fail('TRUNCATED', `capsule is ${buf.length} bytes, shorter than the ${HEADER_SIZE}-byte header`);
  if (buf.length > limits.maxCapsule) fail('OVERSIZE', `capsule is ${buf.length} bytes, the limit is ${limits.maxCapsule}`);
  const version = buf[HeaderField.VERSION];
  if (version !== CAPSULE_VERSION) fail('BAD_VERSION', `capsule version is ${version}, expected ${CAPSULE_VERSION}`);
  const op = buf[HeaderField.OPCODE];
  if (!isOpcode(op)) fail('BAD_OPCODE', `unknown opcode ${hex(op)}`);
  if (from !== undefined && senderOf(op) !== from) fail('BAD_OPCODE', `${opcodeName(op)} is not sent by the ${from}`);
  const length = buf.readUInt32BE(HeaderField.LENGTH);
  if (length > buf.length) fail('TRUNCATED', `${opcodeName(op)}: length field says ${length} bytes, got ${buf.length}`);
  if (length < buf.length) fail('LENGTH_MISMATCH', `${opcodeName(op)}: length field says ${length} bytes, got ${buf.length}`);
  return { op, flags: buf.readUInt16BE(HeaderField.FLAGS), length, tag: buf.readBigUInt64BE(HeaderField.TAG) };
}

/** For the per-opcode decoders: the header must carry this opcode. */
export function readHeaderOf(buf: Buffer, op: Opcode, limits: WireLimits): CapsuleHeader {
  const header = readHeader(buf, limits);
  if (header.op !== op) fail('BAD_OPCODE', `expected ${opcodeName(op)}, got ${opcodeName(header.op)}`);
  return header;
}
