// Mutual HMAC-SHA256 challenge and response (protocol.md "Authentication"). Each side proves
// it knows the per-initiator secret by a MAC over both names and both nonces, each proof
// labelled with its role: a fresh target nonce stops replay of an initiator proof, a fresh
// initiator nonce stops replay of a target proof, and the role byte stops reflection.

import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { MAC_SIZE, NONCE_SIZE } from './constants.js';
import { ProtocolError } from './errors.js';
import { encodeName } from './fields.js';

export const MIN_SECRET_LENGTH = 16;
const LABEL = Buffer.from('rblk-auth-v1', 'ascii');
const ROLE_INITIATOR = 0x49; // 'I'
const ROLE_TARGET = 0x54; // 'T'

/** Everything a proof is bound to. */
export interface AuthTranscript {
  initiatorName: string;
  targetName: string;
  targetNonce: Buffer;
  initiatorNonce: Buffer;
}

export type AuthSecret = Buffer | string;

export function newNonce(): Buffer {
  return randomBytes(NONCE_SIZE);
}

function secretBytes(secret: AuthSecret): Buffer {
  const key = typeof secret === 'string' ? Buffer.from(secret, 'utf8') : secret;
  if (!Buffer.isBuffer(key) || key.length < MIN_SECRET_LENGTH) {
    throw new RangeError(`authentication secret must be at least ${MIN_SECRET_LENGTH} bytes`);
  }
  return key;
}

function isSized(value: Buffer, size: number): boolean {
  return Buffer.isBuffer(value) && value.length === size;
}

/**
 * HMAC-SHA256(secret, "rblk-auth-v1" || role || u8 len || initiator name || u8 len || target name
 * || target nonce || initiator nonce). Names are length-prefixed so that no two transcripts
 * share an input.
 */
function proof(role: number, key: Buffer, t: AuthTranscript): Buffer {
  if (!isSized(t.targetNonce, NONCE_SIZE)) throw new RangeError(`target nonce must be ${NONCE_SIZE} bytes`);
  if (!isSized(t.initiatorNonce, NONCE_SIZE)) throw new RangeError(`initiator nonce must be ${NONCE_SIZE} bytes`);
  const initiator = encodeName(t.initiatorName, 'initiator name');
  const target = encodeName(t.targetName, 'target name');
  return createHmac('sha256', key)
    .update(LABEL)
    .update(Buffer.of(role, initiator.length))
    .update(initiator)
    .update(Buffer.of(target.length))
    .update(target)
    .update(t.targetNonce)
    .update(t.initiatorNonce)
    .digest();
}

/** Sent by the initiator in LOGIN_AUTH. */
export function initiatorProof(secret: AuthSecret, t: AuthTranscript): Buffer {
  return proof(ROLE_INITIATOR, secretBytes(secret), t);
}

/** Sent by the target in LOGIN_RSP. */
export function targetProof(secret: AuthSecret, t: AuthTranscript): Buffer {
  return proof(ROLE_TARGET, secretBytes(secret), t);
}

function verify(role: number, secret: AuthSecret, t: AuthTranscript, received: Buffer): boolean {
  // A bad local secret is a configuration error and throws; anything wrong in what came off
  // the wire simply fails verification.
  const key = secretBytes(secret);
  if (!isSized(received, MAC_SIZE) || !isSized(t.targetNonce, NONCE_SIZE) || !isSized(t.initiatorNonce, NONCE_SIZE)) {
    return false;
  }
  // A peer that echoes our nonce back is trying to make us compute its answer.
  if (t.targetNonce.equals(t.initiatorNonce)) return false;
  let expected: Buffer;
  try {
    expected = proof(role, key, t);
  } catch (err) {
    if (err instanceof ProtocolError) return false;
    throw err;
  }
  return timingSafeEqual(expected, received);
}

/** The target's check of LOGIN_AUTH; constant-time in the MAC. */
export function verifyInitiatorProof(secret: AuthSecret, t: AuthTranscript, received: Buffer): boolean {
  return verify(ROLE_INITIATOR, secret, t, received);
}

/** The initiator's check of LOGIN_RSP's proof; constant-time in the MAC. */
export function verifyTargetProof(secret: AuthSecret, t: AuthTranscript, received: Buffer): boolean {
  return verify(ROLE_TARGET, secret, t, received);
}
