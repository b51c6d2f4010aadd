// LOGIN_REQ, LOGIN_RSP and LOGIN_REJ (protocol.md "Login"), modelled on SRP_LOGIN_REQ/RSP/REJ
// (SRP r16a 6.2-6.4) with iSCSI-style names in place of 16-byte port identifiers.

import {
  CapsuleSize,
  LoginRejectReason,
  LoginRequestFlags,
  LoginResponseFlags,
  MAC_SIZE,
  MAX_CAPSULE_SIZE,
  MAX_DESCRIPTORS,
  MAX_KEEPALIVE_MS,
  MAX_QUEUE_DEPTH,
  MIN_CAPSULE_SIZE,
  MIN_KEEPALIVE_MS,
  Opcode,
  valueGuard,
  type Sender,
} from './constants.js';
import { fail } from './errors.js';
import {
  checkBytes,
  checkRange,
  checkU64,
  decodeName,
  encodeName,
  exactLength,
  requireFlags,
  requireZero,
  U32_MAX,
} from './fields.js';
import { PROTOCOL_LIMITS, readHeaderOf, writeHeader, type CapsuleHeader, type WireLimits } from './header.js';

export interface LoginRequest {
  op: typeof Opcode.LOGIN_REQ;
  tag: bigint;
  /** The initiator refuses a login that is not mutually authenticated. */
  authRequired: boolean;
  /** Largest capsule the initiator will send (SRP req_it_iu_len). */
  maxItCapsule: number;
  /** Largest capsule the initiator can receive: its receive buffer size. */
  maxTiCapsule: number;
  /** Requested in-capsule (immediate) write data size; 0 for none. */
  immediateDataSize: number;
  /** Requested queue depth. */
  credits: number;
  initiatorName: string;
  targetName: string;
}

export interface LoginResponse {
  op: typeof Opcode.LOGIN_RSP;
  tag: bigint;
  sessionId: bigint;
  maxItCapsule: number;
  maxTiCapsule: number;
  immediateDataSize: number;
  /** Largest total data length of one CMD. */
  maxTransfer: number;
  /** Initial credits: receive buffers posted for CMD and TSK_MGMT (SRP req_lim_delta). */
  credits: number;
  maxDescriptors: number;
  /** How often an idle initiator sends KEEPALIVE; 0 turns keep-alive off. */
  keepAliveMs: number;
  /** The target's HMAC proof; null when the login was not authenticated. */
  targetProof: Buffer | null;
}

export interface LoginReject {
  op: typeof Opcode.LOGIN_REJ;
  tag: bigint;
  reason: LoginRejectReason;
  /** The largest capsule the target would accept, as a hint for a retry; 0 when not given. */
  maxItCapsule: number;
}

const isLoginRejectReason = valueGuard(LoginRejectReason);
const maxImmediateFor = (maxItCapsule: number): number => maxItCapsule - CapsuleSize.CMD_FIXED;

function checkLoginParameters(
  p: { maxItCapsule: number; maxTiCapsule: number; immediateDataSize: number; credits: number },
  what: string,
): void {
  checkRange(p.maxItCapsule, MIN_CAPSULE_SIZE, MAX_CAPSULE_SIZE, `${what}: max initiator-to-target capsule`);
  checkRange(p.maxTiCapsule, MIN_CAPSULE_SIZE, MAX_CAPSULE_SIZE, `${what}: max target-to-initiator capsule`);
  checkRange(p.immediateDataSize, 0, maxImmediateFor(p.maxItCapsule), `${what}: immediate data size`);
  checkRange(p.credits, 1, MAX_QUEUE_DEPTH, `${what}: credits`);
}

function checkKeepAlive(ms: number, what: string): void {
  if (ms !== 0) checkRange(ms, MIN_KEEPALIVE_MS, MAX_KEEPALIVE_MS, `${what}: keep-alive interval (ms)`);
}

export function loginRequestLength(req: LoginRequest): number {
  return CapsuleSize.LOGIN_REQ_FIXED + Buffer.byteLength(req.initiatorName, 'utf8') + Buffer.byteLength(req.targetName, 'utf8');
}

export function encodeLoginRequest(buf: Buffer, req: LoginRequest): number {
  checkLoginParameters(req, 'LOGIN_REQ');
  const initiator = encodeName(req.initiatorName, 'LOGIN_REQ: initiator name');
  const target = encodeName(req.targetName, 'LOGIN_REQ: target name');
  const length = CapsuleSize.LOGIN_REQ_FIXED + initiator.length + target.length;
  writeHeader(buf, Opcode.LOGIN_REQ, req.authRequired ? LoginRequestFlags.AUTH_REQUIRED : 0, length, req.tag);
  buf.writeUInt32BE(req.maxItCapsule, 16);
  buf.writeUInt32BE(req.maxTiCapsule, 20);
  buf.writeUInt32BE(req.immediateDataSize, 24);
  buf.writeUInt16BE(req.credits, 28);
  buf[30] = initiator.length;
  buf[31] = target.length;
  initiator.copy(buf, 32);
  target.copy(buf, 32 + initiator.length);
  return length;
}

export function readLoginRequest(buf: Buffer, header: CapsuleHeader): LoginRequest {
  requireFlags(header.flags, LoginRequestFlags.AUTH_REQUIRED, 'LOGIN_REQ');
  if (buf.length < CapsuleSize.LOGIN_REQ_FIXED) {
    fail('TRUNCATED', `LOGIN_REQ needs at least ${CapsuleSize.LOGIN_REQ_FIXED} bytes, got ${buf.length}`);
  }
  const initiatorLength = buf[30];
  const targetLength = buf[31];
  // Each length is a u8, so the sum cannot overflow; it still has to match the capsule exactly.
  exactLength(buf, CapsuleSize.LOGIN_REQ_FIXED + initiatorLength + targetLength, 'LOGIN_REQ with its names');
  const req: LoginRequest = {
    op: Opcode.LOGIN_REQ,
    tag: header.tag,
    authRequired: (header.flags & LoginRequestFlags.AUTH_REQUIRED) !== 0,
    maxItCapsule: buf.readUInt32BE(16),
    maxTiCapsule: buf.readUInt32BE(20),
    immediateDataSize: buf.readUInt32BE(24),
    credits: buf.readUInt16BE(28),
    initiatorName: decodeName(buf, 32, initiatorLength, 'LOGIN_REQ: initiator name'),
    targetName: decodeName(buf, 32 + initiatorLength, targetLength, 'LOGIN_REQ: target name'),
  };
  checkLoginParameters(req, 'LOGIN_REQ');
  return req;
}

export function decodeLoginRequest(buf: Buffer, limits: WireLimits = PROTOCOL_LIMITS): LoginRequest {
  return readLoginRequest(buf, readHeaderOf(buf, Opcode.LOGIN_REQ, limits));
}

function checkLoginResponse(rsp: LoginResponse): void {
  checkLoginParameters(rsp, 'LOGIN_RSP');
  checkRange(rsp.maxTransfer, 1, U32_MAX, 'LOGIN_RSP: max transfer');
  checkRange(rsp.immediateDataSize, 0, rsp.maxTransfer, 'LOGIN_RSP: immediate data size');
  checkRange(rsp.maxDescriptors, 1, MAX_DESCRIPTORS, 'LOGIN_RSP: max descriptors');
  checkKeepAlive(rsp.keepAliveMs, 'LOGIN_RSP');
}

export function encodeLoginResponse(buf: Buffer, rsp: LoginResponse): number {
  checkU64(rsp.sessionId, 'LOGIN_RSP: session id');
  checkLoginResponse(rsp);
  if (rsp.targetProof !== null) checkBytes(rsp.targetProof, MAC_SIZE, 'LOGIN_RSP: target proof');
  const flags = rsp.targetProof !== null ? LoginResponseFlags.AUTHENTICATED : 0;
  writeHeader(buf, Opcode.LOGIN_RSP, flags, CapsuleSize.LOGIN_RSP, rsp.tag);
  buf.writeBigUInt64BE(rsp.sessionId, 16);
  buf.writeUInt32BE(rsp.maxItCapsule, 24);
  buf.writeUInt32BE(rsp.maxTiCapsule, 28);
  buf.writeUInt32BE(rsp.immediateDataSize, 32);
  buf.writeUInt32BE(rsp.maxTransfer, 36);
  buf.writeUInt16BE(rsp.credits, 40);
  buf.writeUInt16BE(rsp.maxDescriptors, 42);
  buf.writeUInt32BE(rsp.keepAliveMs, 44);
  if (rsp.targetProof !== null) rsp.targetProof.copy(buf, 48);
  else buf.fill(0, 48, CapsuleSize.LOGIN_RSP);
  return CapsuleSize.LOGIN_RSP;
}

export function readLoginResponse(buf: Buffer, header: CapsuleHeader): LoginResponse {
  requireFlags(header.flags, LoginResponseFlags.AUTHENTICATED, 'LOGIN_RSP');
  exactLength(buf, CapsuleSize.LOGIN_RSP, 'LOGIN_RSP');
  const authenticated = (header.flags & LoginResponseFlags.AUTHENTICATED) !== 0;
  if (!authenticated) requireZero(buf, 48, CapsuleSize.LOGIN_RSP, 'LOGIN_RSP without AUTHENTICATED');
  const rsp: LoginResponse = {
    op: Opcode.LOGIN_RSP,
    tag: header.tag,
    sessionId: buf.readBigUInt64BE(16),
    maxItCapsule: buf.readUInt32BE(24),
    maxTiCapsule: buf.readUInt32BE(28),
    immediateDataSize: buf.readUInt32BE(32),
    maxTransfer: buf.readUInt32BE(36),
    credits: buf.readUInt16BE(40),
    maxDescriptors: buf.readUInt16BE(42),
    keepAliveMs: buf.readUInt32BE(44),
    targetProof: authenticated ? buf.subarray(48, 48 + MAC_SIZE) : null,
  };
  checkLoginResponse(rsp);
  return rsp;
}

export function decodeLoginResponse(buf: Buffer, limits: WireLimits = PROTOCOL_LIMITS): LoginResponse {
  return readLoginResponse(buf, readHeaderOf(buf, Opcode.LOGIN_RSP, limits));
}

function checkRejectHint(maxItCapsule: number): void {
  if (maxItCapsule !== 0) checkRange(maxItCapsule, MIN_CAPSULE_SIZE, MAX_CAPSULE_SIZE, 'LOGIN_REJ: max capsule hint');
}

export function encodeLoginReject(buf: Buffer, rej: LoginReject): number {
  if (!isLoginRejectReason(rej.reason)) fail('BAD_FIELD', `LOGIN_REJ: unknown reason ${rej.reason}`);
  checkRejectHint(rej.maxItCapsule);
  writeHeader(buf, Opcode.LOGIN_REJ, 0, CapsuleSize.LOGIN_REJ, rej.tag);
  buf.writeUInt32BE(rej.reason, 16);
  buf.writeUInt32BE(rej.maxItCapsule, 20);
  return CapsuleSize.LOGIN_REJ;
}

export function readLoginReject(buf: Buffer, header: CapsuleHeader): LoginReject {
  requireFlags(header.flags, 0, 'LOGIN_REJ');
  exactLength(buf, CapsuleSize.LOGIN_REJ, 'LOGIN_REJ');
  const reason = buf.readUInt32BE(16);
  if (!isLoginRejectReason(reason)) fail('BAD_FIELD', `LOGIN_REJ: unknown reason 0x${reason.toString(16).padStart(8, '0')}`);
  const maxItCapsule = buf.readUInt32BE(20);
  checkRejectHint(maxItCapsule);
  return { op: Opcode.LOGIN_REJ, tag: header.tag, reason, maxItCapsule };
}

export function decodeLoginReject(buf: Buffer, limits: WireLimits = PROTOCOL_LIMITS): LoginReject {
  return readLoginReject(buf, readHeaderOf(buf, Opcode.LOGIN_REJ, limits));
}

/**
 * The initiator's check of what the target granted (protocol.md "Negotiation"): a target may
 * lower every requested value, never raise one, and must authenticate when asked to.
 */
export function checkLoginGrant(req: LoginRequest, rsp: LoginResponse): void {
  if (rsp.tag !== req.tag) fail('BAD_FIELD', `LOGIN_RSP: tag ${rsp.tag} does not answer LOGIN_REQ tag ${req.tag}`);
  const lowered: Array<[string, number, number]> = [
    ['max initiator-to-target capsule', rsp.maxItCapsule, req.maxItCapsule],
    ['max target-to-initiator capsule', rsp.maxTiCapsule, req.maxTiCapsule],
    ['immediate data size', rsp.immediateDataSize, req.immediateDataSize],
    ['credits', rsp.credits, req.credits],
  ];
  for (const [what, granted, requested] of lowered) {
    if (granted > requested) fail('BAD_FIELD', `LOGIN_RSP: ${what} ${granted} exceeds the requested ${requested}`);
  }
  if (req.authRequired && rsp.targetProof === null) fail('BAD_FIELD', 'LOGIN_RSP: not authenticated, but the initiator required it');
}

/**
 * The limits a receiver applies once logged in. The target receives initiator capsules (bounded
 * by maxItCapsule); the initiator receives target capsules (bounded by maxTiCapsule).
 */
export function sessionLimits(rsp: LoginResponse, receiver: Sender): WireLimits {
  return {
    maxCapsule: receiver === 'target' ? rsp.maxItCapsule : rsp.maxTiCapsule,
    maxImmediate: receiver === 'target' ? rsp.immediateDataSize : 0,
    maxDescriptors: rsp.maxDescriptors,
    maxTransfer: rsp.maxTransfer,
  };
}
