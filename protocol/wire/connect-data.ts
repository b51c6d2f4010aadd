// Private data carried by the fabric's connection events (fi_connect, fi_accept, fi_reject),
// before any capsule flows (protocol.md "Connection private data"). It must fit in the 56
// bytes RDMA/CM allows in a connect request; every kind is 16 bytes. The version
// byte is how a connection's protocol version is negotiated (§3):
//   0 magic "RBLK" | 4 version u8 | 5 kind u8 | 6 u16 | 8 u32 | 12 reserved u32

import {
  CONNECT_DATA_SIZE,
  CONNECT_MAGIC,
  CONTROL_RECV_BUFFERS,
  ConnectKind,
  ConnectRejectReason,
  MAX_CAPSULE_SIZE,
  MAX_QUEUE_DEPTH,
  MIN_CAPSULE_SIZE,
  MIN_PROTOCOL_VERSION,
  PROTOCOL_VERSION,
  valueGuard,
} from './constants.js';
import { fail } from './errors.js';
import { checkRange, ensureCapacity, hex, requireZero, U8_MAX } from './fields.js';

/** Providers may hand over padded private data (IB CM pads REP to 196 and REJ to 148 bytes). */
const MAX_RECEIVED_PRIVATE_DATA = 256;
const MAX_RECV_BUFFERS = MAX_QUEUE_DEPTH + CONTROL_RECV_BUFFERS;

export interface ConnectRequestData {
  kind: typeof ConnectKind.CONNECT;
  /** The protocol version the initiator asks for (§3); 1 when absent. Decoded data always has it. */
  version?: number;
  /** The largest capsule the initiator will send; the target sizes its receive buffers by it. */
  maxCapsule: number;
  /** Requested queue depth (credits). */
  queueDepth: number;
}

export interface ConnectAcceptData {
  kind: typeof ConnectKind.ACCEPT;
  /** The connection's protocol version: the CONNECT's, echoed (§3); 1 when absent. Decoded data always has it. */
  version?: number;
  /** The largest capsule the target will receive: the size of the buffers it posted. */
  maxCapsule: number;
  /** Receive buffers the target has posted for this connection. */
  recvBuffers: number;
}

export interface ConnectRejectData {
  kind: typeof ConnectKind.REJECT;
  /** The highest protocol version the target speaks. */
  version: number;
  reason: ConnectRejectReason;
}

export type ConnectData = ConnectRequestData | ConnectAcceptData | ConnectRejectData;

const isConnectKind = valueGuard(ConnectKind);
const isConnectRejectReason = valueGuard(ConnectRejectReason);

export function encodeConnectData(buf: Buffer, data: ConnectData): number {
  ensureCapacity(buf, CONNECT_DATA_SIZE, 'connect data');
  buf.fill(0, 0, CONNECT_DATA_SIZE);
  buf.writeUInt32BE(CONNECT_MAGIC, 0);
  buf[5] = data.kind;
  switch (data.kind) {
    case ConnectKind.CONNECT:
      buf[4] = checkVersion(data.version ?? MIN_PROTOCOL_VERSION, 'CONNECT');
      checkRange(data.maxCapsule, MIN_CAPSULE_SIZE, MAX_CAPSULE_SIZE, 'CONNECT: max capsule');
      checkRange(data.queueDepth, 1, MAX_QUEUE_DEPTH, 'CONNECT: queue depth');
      buf.writeUInt16BE(data.queueDepth, 6);
      buf.writeUInt32BE(data.maxCapsule, 8);
      break;
    case ConnectKind.ACCEPT:
      buf[4] = checkVersion(data.version ?? MIN_PROTOCOL_VERSION, 'ACCEPT');
      checkRange(data.maxCapsule, MIN_CAPSULE_SIZE, MAX_CAPSULE_SIZE, 'ACCEPT: max capsule');
      checkRange(data.recvBuffers, 1, MAX_RECV_BUFFERS, 'ACCEPT: receive buffers');
      buf.writeUInt16BE(data.recvBuffers, 6);
      buf.writeUInt32BE(data.maxCapsule, 8);
      break;
    case ConnectKind.REJECT:
      checkRange(data.version, 1, U8_MAX, 'REJECT: version');
      if (!isConnectRejectReason(data.reason)) fail('BAD_FIELD', `REJECT: unknown reason ${data.reason}`);
      buf[4] = data.version;
      buf.writeUInt16BE(data.reason, 6);
      break;
    default:
      fail('BAD_FIELD', 'connect data: unknown kind');
  }
  return CONNECT_DATA_SIZE;
}

function checkVersion(v: number, what: string): number {
  if (!Number.isInteger(v) || v < MIN_PROTOCOL_VERSION || v > PROTOCOL_VERSION) {
    fail('BAD_VERSION', `${what}: version ${v} is not one this side speaks (${MIN_PROTOCOL_VERSION}-${PROTOCOL_VERSION})`);
  }
  return v;
}

export function connectDataBuffer(data: ConnectData): Buffer {
  const buf = Buffer.alloc(CONNECT_DATA_SIZE);
  encodeConnectData(buf, data);
  return buf;
}

export function decodeConnectData<K extends ConnectKind>(buf: Buffer, expected: K): Extract<ConnectData, { kind: K }>;
export function decodeConnectData(buf: Buffer): ConnectData;
export function decodeConnectData(buf: Buffer, expected?: ConnectKind): ConnectData {
  if (!Buffer.isBuffer(buf)) fail('TRUNCATED', 'connect data is not a Buffer');
  if (buf.length < CONNECT_DATA_SIZE) fail('TRUNCATED', `connect data is ${buf.length} bytes, needs ${CONNECT_DATA_SIZE}`);
  if (buf.length > MAX_RECEIVED_PRIVATE_DATA) {
    fail('OVERSIZE', `connect data is ${buf.length} bytes, the limit is ${MAX_RECEIVED_PRIVATE_DATA}`);
  }
  if (buf.readUInt32BE(0) !== CONNECT_MAGIC) fail('BAD_MAGIC', `connect data magic is ${buf.toString('hex', 0, 4)}, expected "RBLK"`);
  const kind = buf[5];
  if (!isConnectKind(kind)) fail('BAD_FIELD', `connect data kind is ${hex(kind)}`);
  if (expected !== undefined && kind !== expected) fail('BAD_FIELD', `connect data kind is ${kind}, expected ${expected}`);
  const version = buf[4];
  // A REJECT's version is the target's own, so that an initiator can learn what to retry with.
  if (kind !== ConnectKind.REJECT && (version < MIN_PROTOCOL_VERSION || version > PROTOCOL_VERSION)) {
    fail('BAD_VERSION', `connect data version is ${version}, expected ${MIN_PROTOCOL_VERSION} to ${PROTOCOL_VERSION}`);
  }
  requireZero(buf, 12, buf.length, 'connect data');
  const field16 = buf.readUInt16BE(6);
  const field32 = buf.readUInt32BE(8);
  switch (kind) {
    case ConnectKind.CONNECT:
      checkRange(field32, MIN_CAPSULE_SIZE, MAX_CAPSULE_SIZE, 'CONNECT: max capsule');
      checkRange(field16, 1, MAX_QUEUE_DEPTH, 'CONNECT: queue depth');
      return { kind, version, maxCapsule: field32, queueDepth: field16 };
    case ConnectKind.ACCEPT:
      checkRange(field32, MIN_CAPSULE_SIZE, MAX_CAPSULE_SIZE, 'ACCEPT: max capsule');
      checkRange(field16, 1, MAX_RECV_BUFFERS, 'ACCEPT: receive buffers');
      return { kind, version, maxCapsule: field32, recvBuffers: field16 };
    case ConnectKind.REJECT:
      if (version === 0) fail('BAD_VERSION', 'REJECT: version is 0');
      requireZero(buf, 8, 12, 'REJECT');
      if (!isConnectRejectReason(field16)) fail('BAD_FIELD', `REJECT: unknown reason ${field16}`);
      return { kind, version, reason: field16 };
  }
}
