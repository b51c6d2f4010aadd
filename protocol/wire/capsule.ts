// Every capsule as one discriminated union on `op`, with the dispatchers that decode any
// received capsule and encode any capsule to send.

import { CapsuleSize, Opcode, type Sender } from './constants.js';
import { PROTOCOL_LIMITS, readHeader, type WireLimits } from './header.js';
import { commandLength, encodeCommand, readCommand, type CommandCapsule } from './command.js';
import {
  encodeLoginAuth,
  encodeLoginChallenge,
  readLoginAuth,
  readLoginChallenge,
  type LoginAuth,
  type LoginChallenge,
} from './login-challenge.js';
import {
  encodeLoginReject,
  encodeLoginRequest,
  encodeLoginResponse,
  loginRequestLength,
  readLoginReject,
  readLoginRequest,
  readLoginResponse,
  type LoginReject,
  type LoginRequest,
  type LoginResponse,
} from './login.js';
import { encodeResponse, readResponse, responseLength, type ResponseCapsule } from './response.js';
import {
  encodeCreditRequest,
  encodeHeaderOnly,
  encodeTargetLogout,
  readCreditRequest,
  readHeaderOnly,
  readTargetLogout,
  type CreditRequest,
  type HeaderOnlyCapsule,
  type TargetLogout,
} from './session-control.js';
import {
  encodeTaskManagement,
  encodeTaskManagementResponse,
  readTaskManagement,
  readTaskManagementResponse,
  type TaskManagement,
  type TaskManagementResponse,
} from './task-management.js';

export type Capsule =
  | LoginRequest
  | LoginChallenge
  | LoginAuth
  | LoginResponse
  | LoginReject
  | CommandCapsule
  | ResponseCapsule
  | TaskManagement
  | TaskManagementResponse
  | HeaderOnlyCapsule
  | TargetLogout
  | CreditRequest;

export interface DecodeOptions {
  /** Who sent the capsule; an opcode the other side alone may send is then BAD_OPCODE. */
  from?: Sender;
  /** The receiver's limits: PROTOCOL_LIMITS before login, sessionLimits() after. */
  limits?: WireLimits;
}

/**
 * Decodes one received capsule: `buf` must be exactly the bytes of one SEND. Throws only
 * ProtocolError. Buffers in the result are views of `buf`, not copies.
 */
export function decodeCapsule(buf: Buffer, options: DecodeOptions = {}): Capsule {
  const limits = options.limits ?? PROTOCOL_LIMITS;
  const header = readHeader(buf, limits, options.from);
  switch (header.op) {
    case Opcode.LOGIN_REQ:
      return readLoginRequest(buf, header);
    case Opcode.LOGIN_CHALLENGE:
      return readLoginChallenge(buf, header);
    case Opcode.LOGIN_AUTH:
      return readLoginAuth(buf, header);
    case Opcode.LOGIN_RSP:
      return readLoginResponse(buf, header);
    case Opcode.LOGIN_REJ:
      return readLoginReject(buf, header);
    case Opcode.CMD:
      return readCommand(buf, header, limits);
    case Opcode.RSP:
      return readResponse(buf, header);
    case Opcode.TSK_MGMT:
      return readTaskManagement(buf, header);
    case Opcode.TSK_RSP:
      return readTaskManagementResponse(buf, header);
    case Opcode.T_LOGOUT:
      return readTargetLogout(buf, header);
    case Opcode.CRED_REQ:
      return readCreditRequest(buf, header);
    case Opcode.I_LOGOUT:
    case Opcode.KEEPALIVE:
    case Opcode.KEEPALIVE_RSP:
    case Opcode.CRED_RSP:
      return readHeaderOnly(buf, header.op, header);
  }
}

/** The number of bytes encodeCapsule will write. */
export function encodedLength(c: Capsule): number {
  switch (c.op) {
    case Opcode.LOGIN_REQ:
      return loginRequestLength(c);
    case Opcode.LOGIN_CHALLENGE:
      return CapsuleSize.LOGIN_CHALLENGE;
    case Opcode.LOGIN_AUTH:
      return CapsuleSize.LOGIN_AUTH;
    case Opcode.LOGIN_RSP:
      return CapsuleSize.LOGIN_RSP;
    case Opcode.LOGIN_REJ:
      return CapsuleSize.LOGIN_REJ;
    case Opcode.CMD:
      return commandLength(c);
    case Opcode.RSP:
      return responseLength(c);
    case Opcode.TSK_MGMT:
      return CapsuleSize.TSK_MGMT;
    case Opcode.TSK_RSP:
      return CapsuleSize.TSK_RSP;
    case Opcode.T_LOGOUT:
      return CapsuleSize.T_LOGOUT;
    case Opcode.CRED_REQ:
      return CapsuleSize.CRED_REQ;
    case Opcode.I_LOGOUT:
    case Opcode.KEEPALIVE:
    case Opcode.KEEPALIVE_RSP:
    case Opcode.CRED_RSP:
      return CapsuleSize.HEADER_ONLY;
  }
}

/**
 * Writes the capsule at offset 0 of `buf` (typically a slice of registered memory) and returns
 * its length. Throws ProtocolError for a value the protocol does not allow, or OVERSIZE when
 * `buf` is too small.
 */
export function encodeCapsule(buf: Buffer, c: Capsule): number {
  switch (c.op) {
    case Opcode.LOGIN_REQ:
      return encodeLoginRequest(buf, c);
    case Opcode.LOGIN_CHALLENGE:
      return encodeLoginChallenge(buf, c);
    case Opcode.LOGIN_AUTH:
      return encodeLoginAuth(buf, c);
    case Opcode.LOGIN_RSP:
      return encodeLoginResponse(buf, c);
    case Opcode.LOGIN_REJ:
      return encodeLoginReject(buf, c);
    case Opcode.CMD:
      return encodeCommand(buf, c);
    case Opcode.RSP:
      return encodeResponse(buf, c);
    case Opcode.TSK_MGMT:
      return encodeTaskManagement(buf, c);
    case Opcode.TSK_RSP:
      return encodeTaskManagementResponse(buf, c);
    case Opcode.T_LOGOUT:
      return encodeTargetLogout(buf, c);
    case Opcode.CRED_REQ:
      return encodeCreditRequest(buf, c);
    case Opcode.I_LOGOUT:
    case Opcode.KEEPALIVE:
    case Opcode.KEEPALIVE_RSP:
    case Opcode.CRED_RSP:
      return encodeHeaderOnly(buf, c);
  }
}

/** The allocating convenience: a new Buffer holding exactly the capsule. */
export function capsuleBuffer(c: Capsule): Buffer {
  const buf = Buffer.alloc(encodedLength(c));
  const length = encodeCapsule(buf, c);
  return length === buf.length ? buf : buf.subarray(0, length);
}
