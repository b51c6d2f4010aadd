// Field codecs shared by the capsule codecs: integer ranges, reserved bytes, LUNs, names
// and data descriptors. Decoders check every value before it is used (protocol.md
// "Strict decoding"); encoders apply the same rules so that what they write decodes.

import { DescriptorField, DESCRIPTOR_SIZE, LUN_SIZE, MAX_LUN, MAX_NAME_LENGTH, MAX_QUEUE_DEPTH } from './constants.js';
import { fail, type ProtocolErrorReason } from './errors.js';

export const U8_MAX = 0xff;
export const U16_MAX = 0xffff;
export const U32_MAX = 0xffffffff;
const U64_LIMIT = 1n << 64n;

export function hex(value: number, width = 2): string {
  return `0x${value.toString(16).padStart(width, '0')}`;
}

export function checkRange(
  value: number,
  min: number,
  max: number,
  what: string,
  reason: ProtocolErrorReason = 'BAD_FIELD',
): void {
  if (!Number.isInteger(value) || value < min || value > max) {
    fail(reason, `${what} is ${value}, allowed ${min} to ${max}`);
  }
}

/** No grant can exceed a whole queue, so a larger delta is a broken peer (protocol.md "Credits"). */
export function checkCreditDelta(delta: number, what: string, min = 0): void {
  checkRange(delta, min, MAX_QUEUE_DEPTH, `${what}: credit delta`);
}

export function checkU64(value: bigint, what: string): void {
  if (typeof value !== 'bigint' || value < 0n || value >= U64_LIMIT) {
    fail('BAD_FIELD', `${what} must be a bigint from 0 to 2^64-1`);
  }
}

export function checkBytes(value: Buffer, size: number, what: string): void {
  if (!Buffer.isBuffer(value) || value.length !== size) {
    fail('BAD_FIELD', `${what} must be ${size} bytes`);
  }
}

/** Reserved bytes must be zero so that a later version can give them a meaning (SPC-5 4.3.2). */
export function requireZero(buf: Buffer, start: number, end: number, what: string): void {
  for (let i = start; i < end; i++) {
    if (buf[i] !== 0) fail('RESERVED_NONZERO', `${what}: reserved byte ${i} is ${hex(buf[i])}, must be 0`);
  }
}

/** Undefined flag bits must be clear. */
export function requireFlags(flags: number, allowed: number, what: string): void {
  if ((flags & ~allowed) !== 0) {
    fail('RESERVED_NONZERO', `${what}: flags ${hex(flags, 4)} set reserved bits ${hex(flags & ~allowed, 4)}`);
  }
}

/** Encoders write into caller memory (often registered) and refuse to run past it. */
export function ensureCapacity(buf: Buffer, needed: number, what: string): void {
  if (buf.length < needed) fail('OVERSIZE', `${what} needs ${needed} bytes, the buffer has ${buf.length}`);
}

/** A decoder's final length check: short is TRUNCATED, long is LENGTH_MISMATCH. */
export function exactLength(buf: Buffer, expected: number, what: string): void {
  if (buf.length < expected) fail('TRUNCATED', `${what} needs ${expected} bytes, got ${buf.length}`);
  if (buf.length > expected) fail('LENGTH_MISMATCH', `${what} is ${expected} bytes, got ${buf.length}`);
}

/**
 * SAM-5 4.7.7 single-level LUNs: peripheral device addressing (byte 0 = 0, byte 1 = LUN) for
 * 0-255, as SRP does, and flat space addressing (byte 0 = 0x40 | LUN >> 8) for 256-16383.
 * Only the canonical form is valid, so every LUN has exactly one encoding.
 */
export function writeLun(buf: Buffer, offset: number, lun: number, what: string): void {
  checkRange(lun, 0, MAX_LUN, `${what}: LUN`);
  buf.fill(0, offset, offset + LUN_SIZE);
  if (lun < 256) {
    buf[offset + 1] = lun;
  } else {
    buf[offset] = 0x40 | (lun >> 8);
    buf[offset + 1] = lun & 0xff;
  }
}

export function readLun(buf: Buffer, offset: number, what: string): number {
  for (let i = offset + 2; i < offset + LUN_SIZE; i++) {
    if (buf[i] !== 0) fail('BAD_FIELD', `${what}: LUN ${buf.toString('hex', offset, offset + LUN_SIZE)} is not single-level`);
  }
  const first = buf[offset];
  const second = buf[offset + 1];
  if (first === 0) return second;
  if (first >> 6 === 1) {
    const lun = ((first & 0x3f) << 8) | second;
    if (lun >= 256) return lun;
  }
  fail('BAD_FIELD', `${what}: LUN ${buf.toString('hex', offset, offset + LUN_SIZE)} is not in canonical form`);
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
/** Controls, format characters (bidi overrides, BOM) and spaces would make names ambiguous in logs and ACLs. */
const forbiddenInName = /[\p{Cc}\p{Cf}\p{Z}\uFFFD]/u;

function checkNameText(name: string, what: string): void {
  if (forbiddenInName.test(name)) fail('BAD_NAME', `${what} contains a control, format or space character`);
}

/** The UTF-8 bytes of a name, after checking it against protocol.md "Names". */
export function encodeName(name: string, what: string): Buffer {
  if (typeof name !== 'string' || name.length === 0) fail('BAD_NAME', `${what} is empty`);
  const bytes = Buffer.from(name, 'utf8');
  if (bytes.length > MAX_NAME_LENGTH) fail('BAD_NAME', `${what} is ${bytes.length} bytes, the limit is ${MAX_NAME_LENGTH}`);
  // A lone surrogate becomes U+FFFD on encoding; decoding back exposes it.
  if (utf8.decode(bytes) !== name) fail('BAD_NAME', `${what} is not well-formed Unicode`);
  checkNameText(name, what);
  return bytes;
}

/** The caller has already checked that start + length lies inside buf. */
export function decodeName(buf: Buffer, start: number, length: number, what: string): string {
  if (length === 0) fail('BAD_NAME', `${what} is empty`);
  if (length > MAX_NAME_LENGTH) fail('BAD_NAME', `${what} is ${length} bytes, the limit is ${MAX_NAME_LENGTH}`);
  let name: string;
  try {
    name = utf8.decode(buf.subarray(start, start + length));
  } catch {
    fail('BAD_NAME', `${what} is not valid UTF-8`);
  }
  checkNameText(name, what);
  return name;
}

/**
 * A peer's registered memory as RMA names it: address, key and length, what
 * libfabric's fi_rma_iov carries and what a CMD's descriptors encode
 * (docs/protocol.md §9). The one type for remote memory on both sides and in
 * the fabric layer (docs/architecture.md "Words"): the target moves data to
 * or from the initiator's memory named by one.
 */
export interface DataDescriptor {
  /** Remote address: an offset into the region, or a virtual address under FI_MR_VIRT_ADDR. */
  address: bigint;
  /** The region's remote key (64-bit in libfabric). */
  key: bigint;
  length: number;
}

export function writeDescriptor(buf: Buffer, offset: number, d: DataDescriptor, what: string): void {
  checkU64(d.address, `${what}: address`);
  checkU64(d.key, `${what}: key`);
  checkRange(d.length, 1, U32_MAX, `${what}: length`, 'BAD_DESCRIPTOR');
  if (d.address + BigInt(d.length) > U64_LIMIT) fail('BAD_DESCRIPTOR', `${what}: address range wraps past 2^64`);
  buf.writeBigUInt64BE(d.address, offset + DescriptorField.ADDRESS);
  buf.writeBigUInt64BE(d.key, offset + DescriptorField.KEY);
  buf.writeUInt32BE(d.length, offset + DescriptorField.LENGTH);
  buf.writeUInt32BE(0, offset + DescriptorField.RESERVED);
}

/** The caller has already checked that the descriptor's DESCRIPTOR_SIZE bytes lie inside buf. */
export function readDescriptor(buf: Buffer, offset: number, what: string): DataDescriptor {
  const address = buf.readBigUInt64BE(offset + DescriptorField.ADDRESS);
  const key = buf.readBigUInt64BE(offset + DescriptorField.KEY);
  const length = buf.readUInt32BE(offset + DescriptorField.LENGTH);
  requireZero(buf, offset + DescriptorField.RESERVED, offset + DESCRIPTOR_SIZE, what);
  if (length === 0) fail('BAD_DESCRIPTOR', `${what} has length 0`);
  if (address + BigInt(length) > U64_LIMIT) fail('BAD_DESCRIPTOR', `${what}: address range wraps past 2^64`);
  return { address, key, length };
}
