// The capsules that keep a session alive or end it (protocol.md "Session control"):
// I_LOGOUT and T_LOGOUT (SRP r16a 6.6, 6.8), CRED_REQ and CRED_RSP (SRP r16a 6.10, 6.11),
// and KEEPALIVE with its answer. None of them costs a credit.
//   I_LOGOUT, KEEPALIVE, KEEPALIVE_RSP, CRED_RSP: the header alone
//   T_LOGOUT: 16 reason u32 | 20 reserved u32      CRED_REQ: 16 credit delta u32 | 20 reserved u32

import { CapsuleSize, LogoutReason, Opcode, opcodeName, valueGuard } from './constants.js';
import { fail } from './errors.js';
import { checkCreditDelta, exactLength, requireFlags, requireZero } from './fields.js';
import { writeHeader, type CapsuleHeader } from './header.js';

export interface InitiatorLogout {
  op: typeof Opcode.I_LOGOUT;
  tag: bigint;
}

export interface KeepAlive {
  op: typeof Opcode.KEEPALIVE;
  tag: bigint;
}

export interface KeepAliveResponse {
  op: typeof Opcode.KEEPALIVE_RSP;
  /** The KEEPALIVE's tag. */
  tag: bigint;
}

export interface CreditResponse {
  op: typeof Opcode.CRED_RSP;
  /** The CRED_REQ's tag. */
  tag: bigint;
}

export type HeaderOnlyCapsule = InitiatorLogout | KeepAlive | KeepAliveResponse | CreditResponse;

export interface TargetLogout {
  op: typeof Opcode.T_LOGOUT;
  tag: bigint;
  reason: LogoutReason;
}

export interface CreditRequest {
  op: typeof Opcode.CRED_REQ;
  tag: bigint;
  /** Credits granted on top of those the initiator holds; at least 1. */
  creditDelta: number;
}

const isLogoutReason = valueGuard(LogoutReason);

export function encodeHeaderOnly(buf: Buffer, c: HeaderOnlyCapsule): number {
  writeHeader(buf, c.op, 0, CapsuleSize.HEADER_ONLY, c.tag);
  return CapsuleSize.HEADER_ONLY;
}

export function readHeaderOnly(buf: Buffer, op: HeaderOnlyCapsule['op'], header: CapsuleHeader): HeaderOnlyCapsule {
  requireFlags(header.flags, 0, opcodeName(op));
  exactLength(buf, CapsuleSize.HEADER_ONLY, opcodeName(op));
  return { op, tag: header.tag };
}

export function encodeTargetLogout(buf: Buffer, logout: TargetLogout): number {
  if (!isLogoutReason(logout.reason)) fail('BAD_FIELD', `T_LOGOUT: unknown reason ${logout.reason}`);
  writeHeader(buf, Opcode.T_LOGOUT, 0, CapsuleSize.T_LOGOUT, logout.tag);
  buf.writeUInt32BE(logout.reason, 16);
  buf.writeUInt32BE(0, 20);
  return CapsuleSize.T_LOGOUT;
}

export function readTargetLogout(buf: Buffer, header: CapsuleHeader): TargetLogout {
  requireFlags(header.flags, 0, 'T_LOGOUT');
  exactLength(buf, CapsuleSize.T_LOGOUT, 'T_LOGOUT');
  const reason = buf.readUInt32BE(16);
  if (!isLogoutReason(reason)) fail('BAD_FIELD', `T_LOGOUT: unknown reason ${reason}`);
  requireZero(buf, 20, 24, 'T_LOGOUT');
  return { op: Opcode.T_LOGOUT, tag: header.tag, reason };
}

export function encodeCreditRequest(buf: Buffer, req: CreditRequest): number {
  checkCreditDelta(req.creditDelta, 'CRED_REQ', 1);
  writeHeader(buf, Opcode.CRED_REQ, 0, CapsuleSize.CRED_REQ, req.tag);
  buf.writeUInt32BE(req.creditDelta, 16);
  buf.writeUInt32BE(0, 20);
  return CapsuleSize.CRED_REQ;
}

export function readCreditRequest(buf: Buffer, header: CapsuleHeader): CreditRequest {
  requireFlags(header.flags, 0, 'CRED_REQ');
  exactLength(buf, CapsuleSize.CRED_REQ, 'CRED_REQ');
  const creditDelta = buf.readUInt32BE(16);
  checkCreditDelta(creditDelta, 'CRED_REQ', 1);
  requireZero(buf, 20, 24, 'CRED_REQ');
  return { op: Opcode.CRED_REQ, tag: header.tag, creditDelta };
}
