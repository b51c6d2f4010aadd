// LOGIN_CHALLENGE and LOGIN_AUTH: the two capsules of mutual HMAC-SHA256 authentication
// (protocol.md "Authentication"). The MACs themselves are computed in auth.ts.

import { AuthAlgorithm, CapsuleSize, MAC_SIZE, NONCE_SIZE, Opcode } from './constants.js';
import { fail } from './errors.js';
import { checkBytes, exactLength, requireFlags, requireZero } from './fields.js';
import { PROTOCOL_LIMITS, readHeaderOf, writeHeader, type CapsuleHeader, type WireLimits } from './header.js';

export interface LoginChallenge {
  op: typeof Opcode.LOGIN_CHALLENGE;
  /** The LOGIN_REQ's tag. */
  tag: bigint;
  targetNonce: Buffer;
}

export interface LoginAuth {
  op: typeof Opcode.LOGIN_AUTH;
  /** The LOGIN_REQ's tag. */
  tag: bigint;
  initiatorNonce: Buffer;
  initiatorProof: Buffer;
}

/** Bytes 16-23 of both capsules: algorithm u8, then 7 reserved bytes. */
function writeAlgorithm(buf: Buffer): void {
  buf[16] = AuthAlgorithm.HMAC_SHA256;
  buf.fill(0, 17, 24);
}

function readAlgorithm(buf: Buffer, what: string): void {
  if (buf[16] !== AuthAlgorithm.HMAC_SHA256) fail('BAD_FIELD', `${what}: unknown authentication algorithm ${buf[16]}`);
  requireZero(buf, 17, 24, what);
}

export function encodeLoginChallenge(buf: Buffer, ch: LoginChallenge): number {
  checkBytes(ch.targetNonce, NONCE_SIZE, 'LOGIN_CHALLENGE: target nonce');
  writeHeader(buf, Opcode.LOGIN_CHALLENGE, 0, CapsuleSize.LOGIN_CHALLENGE, ch.tag);
  writeAlgorithm(buf);
  ch.targetNonce.copy(buf, 24);
  return CapsuleSize.LOGIN_CHALLENGE;
}

export function readLoginChallenge(buf: Buffer, header: CapsuleHeader): LoginChallenge {
  requireFlags(header.flags, 0, 'LOGIN_CHALLENGE');
  exactLength(buf, CapsuleSize.LOGIN_CHALLENGE, 'LOGIN_CHALLENGE');
  readAlgorithm(buf, 'LOGIN_CHALLENGE');
  return { op: Opcode.LOGIN_CHALLENGE, tag: header.tag, targetNonce: buf.subarray(24, 24 + NONCE_SIZE) };
}

export function decodeLoginChallenge(buf: Buffer, limits: WireLimits = PROTOCOL_LIMITS): LoginChallenge {
  return readLoginChallenge(buf, readHeaderOf(buf, Opcode.LOGIN_CHALLENGE, limits));
}

export function encodeLoginAuth(buf: Buffer, auth: LoginAuth): number {
  checkBytes(auth.initiatorNonce, NONCE_SIZE, 'LOGIN_AUTH: initiator nonce');
  checkBytes(auth.initiatorProof, MAC_SIZE, 'LOGIN_AUTH: initiator proof');
  writeHeader(buf, Opcode.LOGIN_AUTH, 0, CapsuleSize.LOGIN_AUTH, auth.tag);
  writeAlgorithm(buf);
  auth.initiatorNonce.copy(buf, 24);
  auth.initiatorProof.copy(buf, 24 + NONCE_SIZE);
  return CapsuleSize.LOGIN_AUTH;
}

export function readLoginAuth(buf: Buffer, header: CapsuleHeader): LoginAuth {
  requireFlags(header.flags, 0, 'LOGIN_AUTH');
  exactLength(buf, CapsuleSize.LOGIN_AUTH, 'LOGIN_AUTH');
  readAlgorithm(buf, 'LOGIN_AUTH');
  return {
    op: Opcode.LOGIN_AUTH,
    tag: header.tag,
    initiatorNonce: buf.subarray(24, 24 + NONCE_SIZE),
    initiatorProof: buf.subarray(24 + NONCE_SIZE, 24 + NONCE_SIZE + MAC_SIZE),
  };
}

export function decodeLoginAuth(buf: Buffer, limits: WireLimits = PROTOCOL_LIMITS): LoginAuth {
  return readLoginAuth(buf, readHeaderOf(buf, Opcode.LOGIN_AUTH, limits));
}
