// CHAP over the iSCSI login (RFC 7143 §12.1.3, RFC 1994): MD5 over the
// identifier, the secret and the challenge. The secret is the initiator's
// from the config's auth.initiators, the one rblk logins use
// (docs/iscsi.md "Authentication").
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** CHAP_A=5: MD5, the one algorithm every iSCSI implementation has. */
export const CHAP_MD5 = '5';
const CHALLENGE_BYTES = 16;
/** RFC 7143 §12.1.3: challenges are at most 1024 bytes. */
const MAX_CHALLENGE = 1024;

export class ChapError extends Error {}

export interface ChapChallenge {
  readonly id: number;
  readonly challenge: Buffer;
}

export function newChallenge(): ChapChallenge {
  return { id: randomBytes(1)[0], challenge: randomBytes(CHALLENGE_BYTES) };
}

export function chapResponse(id: number, secret: string | Buffer, challenge: Buffer): Buffer {
  return createHash('md5').update(Buffer.from([id])).update(secret).update(challenge).digest();
}

/** A CHAP binary value: 0x hex or 0b base64 (RFC 7143 §6.1 binary-value). */
export function decodeBinary(value: string, key: string): Buffer {
  let out: Buffer;
  if (/^0[xX][0-9a-fA-F]+$/.test(value)) {
    const hex = value.slice(2);
    out = Buffer.from(hex.length % 2 ? `0${hex}` : hex, 'hex');
  } else if (/^0[bB][A-Za-z0-9+/=]+$/.test(value)) out = Buffer.from(value.slice(2), 'base64');
  else throw new ChapError(`${key} is not a hex (0x) or base64 (0b) value`);
  if (out.length === 0 || out.length > MAX_CHALLENGE) throw new ChapError(`${key} has ${out.length} bytes`);
  return out;
}

export const encodeBinary = (b: Buffer): string => `0x${b.toString('hex')}`;

/** Whether the initiator's CHAP_R answers our challenge with `secret`. Constant time in the response. */
export function verifyResponse(c: ChapChallenge, secret: string | Buffer, response: Buffer): boolean {
  const want = chapResponse(c.id, secret, c.challenge);
  return response.length === want.length && timingSafeEqual(response, want);
}
