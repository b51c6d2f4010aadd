// NVMe in-band authentication, DH-HMAC-CHAP (NVMe Base 2.0 §8.13; first
// defined by NVMe-oF TP 8006): the messages carried by the Fabrics
// Authentication Send/Receive commands, the DHHC-1 secret representation, and
// the HMAC computations, for a controller (target/nvme/auth.ts) and a future
// host alike. Little-endian multi-byte fields (Base 2.0 §1.5). Nothing here
// logs: keys and responses must never reach a log.
import { createDiffieHellman, createHash, createHmac, randomBytes, type DiffieHellman } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { FFDHE_PRIMES } from './ffdhe.js';

/** Authentication Send/Receive SQE (NVMe-oF 1.1 §3.6/§3.7 as amended by TP 8006): SPSP0 byte 41, SPSP1 42, SECP 43, TL/AL 44-47. */
export const AUTH_SECP = 0xe9;
export const AUTH_SPSP0 = 0x01;
export const AUTH_SPSP1 = 0x01;

/** AUTH_Type (Base 2.0 §8.13, Figure "Authentication message types"). */
export const AuthType = { Common: 0x00, Dhchap: 0x01 } as const;
/** AUTH_Id: common messages 00h (Negotiate), F0h/F1h (Failure2/Failure1); DH-HMAC-CHAP messages 01h-04h. */
export const AuthId = { Negotiate: 0x00, Challenge: 0x01, Reply: 0x02, Success1: 0x03, Success2: 0x04, Failure2: 0xf0, Failure1: 0xf1 } as const;
/** AUTH protocol identifier in a Negotiate protocol descriptor (§8.13): 01h DH-HMAC-CHAP. */
export const DHCHAP_AUTH_ID = 0x01;
/** Failure reason code (§8.13): 01h authentication failure; and its explanations. */
export const FAILURE_REASON = 0x01;
export const FailureExplanation = {
  Failed: 0x01,
  ProtocolNotUsable: 0x02,
  ConcatMismatch: 0x03,
  HashNotUsable: 0x04,
  DhGroupNotUsable: 0x05,
  IncorrectPayload: 0x06,
  IncorrectMessage: 0x07,
} as const;

/** Hash function identifiers (§8.13): 01h SHA-256, 02h SHA-384, 03h SHA-512. */
export const HASHES: ReadonlyMap<number, { name: 'sha256' | 'sha384' | 'sha512'; length: number }> = new Map([
  [1, { name: 'sha256', length: 32 }],
  [2, { name: 'sha384', length: 48 }],
  [3, { name: 'sha512', length: 64 }],
]);
/** DH group identifiers (§8.13): 00h NULL (no exchange), 01h-05h ffdhe2048..ffdhe8192; value the prime's size in bits. */
export const DH_GROUPS: ReadonlyMap<number, 0 | 2048 | 3072 | 4096 | 6144 | 8192> = new Map([
  [0, 0],
  [1, 2048],
  [2, 3072],
  [3, 4096],
  [4, 6144],
  [5, 8192],
] as const);

export class AuthMessageError extends Error {
  constructor(
    readonly explanation: number,
    message: string,
  ) {
    super(message);
  }
}

// ---- secrets (Base 2.0 §8.13 "DH-HMAC-CHAP secret representation") ----

export interface DhchapKey {
  key: Buffer;
  /** 0: use as is; 1/2/3: Kh' = HMAC-SHA-256/384/512(key, NQN || "NVMe-over-Fabrics"). */
  transform: number;
}

/**
 * A configured secret: `DHHC-1:XX:<base64(key || CRC-32 of key, little-endian)>:`
 * with a 32, 48 or 64 byte key, or any other string, used as the key bytes
 * (UTF-8) untransformed. Throws on a DHHC-1 string that does not check out
 * (the message never contains the secret).
 */
export function parseDhchapSecret(secret: string): DhchapKey {
  if (!secret.startsWith('DHHC-1:')) return { key: Buffer.from(secret, 'utf8'), transform: 0 };
  const m = /^DHHC-1:(\d\d):([A-Za-z0-9+/=]+):?$/.exec(secret);
  if (!m) throw new Error('a DHHC-1 secret must read DHHC-1:XX:<base64>:');
  const transform = Number(m[1]);
  if (transform > 3) throw new Error(`DHHC-1 key transform ${m[1]} is not 00-03`);
  const raw = Buffer.from(m[2], 'base64');
  const key = raw.subarray(0, raw.length - 4);
  if (![32, 48, 64].includes(key.length)) throw new Error(`a DHHC-1 key is 32, 48 or 64 bytes, not ${Math.max(0, key.length)}`);
  if (crc32(key) >>> 0 !== raw.readUInt32LE(raw.length - 4)) throw new Error('DHHC-1 secret CRC-32 mismatch');
  return { key: Buffer.from(key), transform };
}

/** The key an HMAC uses (§8.13): transformed with the NQN of the side the key belongs to (host NQN for Kh, subsystem NQN for Kc). */
export function transformKey(k: DhchapKey, nqn: string): Buffer {
  if (k.transform === 0) return k.key;
  const h = HASHES.get(k.transform)!;
  return createHmac(h.name, k.key).update(nqn, 'utf8').update('NVMe-over-Fabrics', 'ascii').digest();
}

// ---- the DH-HMAC-CHAP computations (§8.13 - §8.13) ----

/** Ca = HMAC(H(g^xy mod p), C) (§8.13), the challenge a response covers when a DH group is in use. */
export function augmentChallenge(hash: string, sharedSecret: Buffer, challenge: Buffer): Buffer {
  const hk = createHash(hash).update(sharedSecret).digest();
  return createHmac(hash, hk).update(challenge).digest();
}

/**
 * R1 = HMAC(Kh', C1 || SEQNUM S1 (LE32) || T_ID (LE16) || SC_C || "HostHost" || NQNh || 00h || NQNc);
 * R2 = HMAC(Kc', C2 || S2 || T_ID || SC_C || "Controller" || NQNc || 00h || NQNh) (§8.13, §8.13).
 * C is the augmented challenge when a DH group is in use.
 */
export function dhchapResponse(o: { hash: string; key: Buffer; challenge: Buffer; seqnum: number; tid: number; scc: number; role: 'host' | 'controller'; hostnqn: string; subnqn: string }): Buffer {
  const fixed = Buffer.alloc(7);
  fixed.writeUInt32LE(o.seqnum >>> 0, 0);
  fixed.writeUInt16LE(o.tid, 4);
  fixed[6] = o.scc;
  const [label, first, second] = o.role === 'host' ? ['HostHost', o.hostnqn, o.subnqn] : ['Controller', o.subnqn, o.hostnqn];
  return createHmac(o.hash, o.key)
    .update(o.challenge)
    .update(fixed)
    .update(label, 'ascii')
    .update(first, 'utf8')
    .update(Buffer.alloc(1))
    .update(second, 'utf8')
    .digest();
}

/** One side's ephemeral DH key in an RFC 7919 group: the public value and the secret from the peer's, both padded to the prime's size. */
export class DhExchange {
  readonly #dh: DiffieHellman;
  readonly #prime: bigint;
  readonly size: number;
  readonly publicValue: Buffer;

  constructor(bits: 2048 | 3072 | 4096 | 6144 | 8192) {
    const p = Buffer.from(FFDHE_PRIMES[bits], 'hex');
    this.#prime = BigInt(`0x${FFDHE_PRIMES[bits]}`);
    this.size = p.length;
    this.#dh = createDiffieHellman(p, 2);
    // A 512-bit exponent: at least twice the groups' security strength (RFC 7919 §5.2), and fast.
    this.#dh.setPrivateKey(randomBytes(64));
    this.publicValue = pad(this.#dh.generateKeys(), this.size);
  }

  /** g^xy mod p; throws AuthMessageError on a peer value outside 1 < y < p-1 or of the wrong size. */
  secret(peer: Buffer): Buffer {
    if (peer.length !== this.size) throw new AuthMessageError(FailureExplanation.IncorrectPayload, `DH value of ${peer.length} bytes, the group's is ${this.size}`);
    const y = BigInt(`0x${peer.toString('hex') || '0'}`);
    if (y <= 1n || y >= this.#prime - 1n) throw new AuthMessageError(FailureExplanation.DhGroupNotUsable, 'DH value out of range');
    return pad(this.#dh.computeSecret(peer), this.size);
  }
}

function pad(b: Buffer, n: number): Buffer {
  return b.length >= n ? b : Buffer.concat([Buffer.alloc(n - b.length), b]);
}

// ---- messages (§8.13, §8.13 - §8.13) ----

/** Every message starts AUTH_Type 0, AUTH_Id 1, reserved 2-3, T_ID 4-5. */
export interface AuthHeader {
  type: number;
  id: number;
  tid: number;
}

export function readAuthHeader(b: Buffer): AuthHeader {
  if (b.length < 6) throw new AuthMessageError(FailureExplanation.IncorrectPayload, `authentication message of ${b.length} bytes`);
  return { type: b[0], id: b[1], tid: b.readUInt16LE(4) };
}

export interface Negotiate {
  tid: number;
  /** SC_C byte 6: secure channel concatenation requested (00h none). */
  scc: number;
  /** The first DH-HMAC-CHAP protocol descriptor's lists, host preference order. */
  hashes: number[];
  dhGroups: number[];
}

/**
 * AUTH_Negotiate (§8.13): SC_C 6, NAPD 7, then NAPD 64-byte protocol
 * descriptors: AUTHID 0, reserved 1, HALEN 2, DHLEN 3, hash IDs at 4 (HALEN of
 * them), DH group IDs at 34 (DHLEN of them).
 */
export function decodeNegotiate(b: Buffer): Negotiate {
  const h = readAuthHeader(b);
  if (b.length < 8) throw new AuthMessageError(FailureExplanation.IncorrectPayload, 'AUTH_Negotiate shorter than its 8-byte header');
  const napd = b[7];
  if (napd < 1 || b.length < 8 + napd * 64) throw new AuthMessageError(FailureExplanation.IncorrectPayload, `AUTH_Negotiate with ${napd} protocol descriptors in ${b.length} bytes`);
  for (let i = 0; i < napd; i++) {
    const d = b.subarray(8 + i * 64, 8 + (i + 1) * 64);
    if (d[0] !== DHCHAP_AUTH_ID) continue;
    const halen = d[2];
    const dhlen = d[3];
    if (halen > 30 || dhlen > 30) throw new AuthMessageError(FailureExplanation.IncorrectPayload, `protocol descriptor HALEN ${halen}, DHLEN ${dhlen}`);
    return { tid: h.tid, scc: b[6], hashes: [...d.subarray(4, 4 + halen)], dhGroups: [...d.subarray(34, 34 + dhlen)] };
  }
  throw new AuthMessageError(FailureExplanation.ProtocolNotUsable, 'AUTH_Negotiate offers no DH-HMAC-CHAP protocol descriptor');
}

export function encodeNegotiate(n: Negotiate): Buffer {
  const b = Buffer.alloc(8 + 64);
  b[0] = AuthType.Common;
  b[1] = AuthId.Negotiate;
  b.writeUInt16LE(n.tid, 4);
  b[6] = n.scc;
  b[7] = 1;
  b[8] = DHCHAP_AUTH_ID;
  b[10] = n.hashes.length;
  b[11] = n.dhGroups.length;
  Buffer.from(n.hashes).copy(b, 12);
  Buffer.from(n.dhGroups).copy(b, 42);
  return b;
}

export interface Challenge {
  tid: number;
  hashId: number;
  dhGroup: number;
  seqnum: number;
  challenge: Buffer;
  dhValue: Buffer;
}

/** DH-HMAC-CHAP_Challenge (§8.13): HL 6, reserved 7, HASHID 8, DHGID 9, DHVLEN 10-11, SEQNUM 12-15, C1 (HL bytes) at 16, then the DH value. */
export function encodeChallenge(c: Challenge): Buffer {
  const b = Buffer.alloc(16 + c.challenge.length + c.dhValue.length);
  b[0] = AuthType.Dhchap;
  b[1] = AuthId.Challenge;
  b.writeUInt16LE(c.tid, 4);
  b[6] = c.challenge.length;
  b[8] = c.hashId;
  b[9] = c.dhGroup;
  b.writeUInt16LE(c.dhValue.length, 10);
  b.writeUInt32LE(c.seqnum >>> 0, 12);
  c.challenge.copy(b, 16);
  c.dhValue.copy(b, 16 + c.challenge.length);
  return b;
}

export function decodeChallenge(b: Buffer): Challenge {
  const h = readAuthHeader(b);
  if (b.length < 16) throw new AuthMessageError(FailureExplanation.IncorrectPayload, 'DH-HMAC-CHAP_Challenge shorter than 16 bytes');
  const hl = b[6];
  const dhvlen = b.readUInt16LE(10);
  if (b.length < 16 + hl + dhvlen) throw new AuthMessageError(FailureExplanation.IncorrectPayload, 'DH-HMAC-CHAP_Challenge shorter than its HL and DHVLEN');
  return { tid: h.tid, hashId: b[8], dhGroup: b[9], seqnum: b.readUInt32LE(12), challenge: Buffer.from(b.subarray(16, 16 + hl)), dhValue: Buffer.from(b.subarray(16 + hl, 16 + hl + dhvlen)) };
}

export interface Reply {
  tid: number;
  response: Buffer;
  /** C2, when the host asks to authenticate the controller (CVALID). */
  challenge: Buffer | null;
  /** S2 (meaningful with CVALID). */
  seqnum: number;
  dhValue: Buffer;
}

/** DH-HMAC-CHAP_Reply (§8.13): HL 6, reserved 7, CVALID 8 bit 0, reserved 9, DHVLEN 10-11, SEQNUM 12-15, R1 at 16, C2 (HL bytes, zero without CVALID), DH value. */
export function decodeReply(b: Buffer): Reply {
  const h = readAuthHeader(b);
  if (b.length < 16) throw new AuthMessageError(FailureExplanation.IncorrectPayload, 'DH-HMAC-CHAP_Reply shorter than 16 bytes');
  const hl = b[6];
  const dhvlen = b.readUInt16LE(10);
  if (b.length < 16 + 2 * hl + dhvlen) throw new AuthMessageError(FailureExplanation.IncorrectPayload, 'DH-HMAC-CHAP_Reply shorter than its HL and DHVLEN');
  return {
    tid: h.tid,
    response: Buffer.from(b.subarray(16, 16 + hl)),
    challenge: (b[8] & 1) !== 0 ? Buffer.from(b.subarray(16 + hl, 16 + 2 * hl)) : null,
    seqnum: b.readUInt32LE(12),
    dhValue: Buffer.from(b.subarray(16 + 2 * hl, 16 + 2 * hl + dhvlen)),
  };
}

export function encodeReply(r: Reply): Buffer {
  const hl = r.response.length;
  const b = Buffer.alloc(16 + 2 * hl + r.dhValue.length);
  b[0] = AuthType.Dhchap;
  b[1] = AuthId.Reply;
  b.writeUInt16LE(r.tid, 4);
  b[6] = hl;
  b[8] = r.challenge ? 1 : 0;
  b.writeUInt16LE(r.dhValue.length, 10);
  b.writeUInt32LE(r.challenge ? r.seqnum >>> 0 : 0, 12);
  r.response.copy(b, 16);
  r.challenge?.copy(b, 16 + hl);
  r.dhValue.copy(b, 16 + 2 * hl);
  return b;
}

/** DH-HMAC-CHAP_Success1 (§8.13): HL 6, reserved 7, RVALID 8 bit 0, reserved 9-15, R2 (HL bytes) at 16 when RVALID. */
export function encodeSuccess1(o: { tid: number; hashLength: number; response: Buffer | null }): Buffer {
  const b = Buffer.alloc(16 + (o.response ? o.hashLength : 0));
  b[0] = AuthType.Dhchap;
  b[1] = AuthId.Success1;
  b.writeUInt16LE(o.tid, 4);
  b[6] = o.hashLength;
  if (o.response) {
    b[8] = 1;
    o.response.copy(b, 16);
  }
  return b;
}

/** DH-HMAC-CHAP_Success2 (§8.13): the header and 10 reserved bytes. */
export function encodeSuccess2(tid: number): Buffer {
  const b = Buffer.alloc(16);
  b[0] = AuthType.Dhchap;
  b[1] = AuthId.Success2;
  b.writeUInt16LE(tid, 4);
  return b;
}

/** AUTH_Failure1/AUTH_Failure2 (§8.13): REASON CODE 6, REASON CODE EXPLANATION 7. */
export function encodeFailure(id: typeof AuthId.Failure1 | typeof AuthId.Failure2, tid: number, explanation: number): Buffer {
  const b = Buffer.alloc(8);
  b[0] = AuthType.Common;
  b[1] = id;
  b.writeUInt16LE(tid, 4);
  b[6] = FAILURE_REASON;
  b[7] = explanation;
  return b;
}
