// Encoders for everything the server writes: option replies during the
// handshake, and simple replies and structured reply chunks during
// transmission (proto.md "Option reply types", "Simple reply message",
// "Structured reply chunk message").
import {
  IHAVEOPT,
  MAX_STRING,
  NBD_MAGIC,
  OPTION_REPLY_MAGIC,
  ReplyFlag,
  ReplyType,
  SIMPLE_REPLY_MAGIC,
  STRUCTURED_REPLY_MAGIC,
} from './constants.js';

export const SIMPLE_REPLY_SIZE = 16;
export const STRUCTURED_HEADER_SIZE = 20;

/** NBDMAGIC, IHAVEOPT, u16 handshake flags. */
export function greeting(handshakeFlags: number): Buffer {
  const buf = Buffer.alloc(18);
  buf.writeBigUInt64BE(NBD_MAGIC, 0);
  buf.writeBigUInt64BE(IHAVEOPT, 8);
  buf.writeUInt16BE(handshakeFlags, 16);
  return buf;
}

export function optionReply(option: number, type: number, data: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(20);
  head.writeBigUInt64BE(OPTION_REPLY_MAGIC, 0);
  head.writeUInt32BE(option, 8);
  head.writeUInt32BE(type, 12);
  head.writeUInt32BE(data.length, 16);
  return data.length === 0 ? head : Buffer.concat([head, data]);
}

/** UTF-8 bytes of a message, cut to the 4096-byte string limit without splitting a character. */
export function messageBytes(message: string): Buffer {
  const bytes = Buffer.from(message, 'utf8');
  if (bytes.length <= MAX_STRING) return bytes;
  let end = MAX_STRING;
  // Back off continuation bytes (10xxxxxx) so the cut lands on a character start.
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--;
  return bytes.subarray(0, end);
}

export function simpleReply(errno: number, cookie: bigint): Buffer {
  const buf = Buffer.allocUnsafe(SIMPLE_REPLY_SIZE);
  buf.writeUInt32BE(SIMPLE_REPLY_MAGIC, 0);
  buf.writeUInt32BE(errno, 4);
  buf.writeBigUInt64BE(cookie, 8);
  return buf;
}

function chunkHeader(buf: Buffer, flags: number, type: number, cookie: bigint, length: number): void {
  buf.writeUInt32BE(STRUCTURED_REPLY_MAGIC, 0);
  buf.writeUInt16BE(flags, 4);
  buf.writeUInt16BE(type, 6);
  buf.writeBigUInt64BE(cookie, 8);
  buf.writeUInt32BE(length, 16);
}

/** Header and offset of a final NBD_REPLY_TYPE_OFFSET_DATA chunk; the data follows it. */
export function offsetDataHeader(cookie: bigint, offset: bigint, dataLength: number): Buffer {
  const buf = Buffer.allocUnsafe(STRUCTURED_HEADER_SIZE + 8);
  chunkHeader(buf, ReplyFlag.DONE, ReplyType.OFFSET_DATA, cookie, 8 + dataLength);
  buf.writeBigUInt64BE(offset, STRUCTURED_HEADER_SIZE);
  return buf;
}

/** A final NBD_REPLY_TYPE_NONE chunk: success with nothing to carry. */
export function noneChunk(cookie: bigint): Buffer {
  const buf = Buffer.allocUnsafe(STRUCTURED_HEADER_SIZE);
  chunkHeader(buf, ReplyFlag.DONE, ReplyType.NONE, cookie, 0);
  return buf;
}

/** A final NBD_REPLY_TYPE_ERROR chunk: u32 error, u16 message length, message. */
export function errorChunk(cookie: bigint, errno: number, message: string): Buffer {
  const text = messageBytes(message);
  const buf = Buffer.allocUnsafe(STRUCTURED_HEADER_SIZE + 6 + text.length);
  chunkHeader(buf, ReplyFlag.DONE, ReplyType.ERROR, cookie, 6 + text.length);
  buf.writeUInt32BE(errno, STRUCTURED_HEADER_SIZE);
  buf.writeUInt16BE(text.length, STRUCTURED_HEADER_SIZE + 4);
  text.copy(buf, STRUCTURED_HEADER_SIZE + 6);
  return buf;
}

/**
 * A final NBD_REPLY_TYPE_BLOCK_STATUS chunk (proto.md "Structured reply
 * types"): u32 context id, then (u32 length, u32 status flags) per extent.
 */
export function blockStatusChunk(cookie: bigint, contextId: number, extents: ReadonlyArray<{ length: number; flags: number }>): Buffer {
  const buf = Buffer.allocUnsafe(STRUCTURED_HEADER_SIZE + 4 + 8 * extents.length);
  chunkHeader(buf, ReplyFlag.DONE, ReplyType.BLOCK_STATUS, cookie, 4 + 8 * extents.length);
  buf.writeUInt32BE(contextId, STRUCTURED_HEADER_SIZE);
  extents.forEach((e, i) => {
    buf.writeUInt32BE(e.length, STRUCTURED_HEADER_SIZE + 4 + 8 * i);
    buf.writeUInt32BE(e.flags, STRUCTURED_HEADER_SIZE + 8 + 8 * i);
  });
  return buf;
}
