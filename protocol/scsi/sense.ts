// Sense data: built by the target, decoded by the initiator. Fixed format
// (SPC-5 4.4.3, response codes 70h/71h, 18 bytes here) by default; descriptor
// format (SPC-5 4.4.2, response codes 72h/73h) when the Control mode page has
// D_SENSE set.
import { findSenseCode, senseKeyName, type SenseCode } from './sense-codes.js';

export type SenseFormat = 'fixed' | 'descriptor';

/** The sense-key-specific field pointer (SPC-5 4.4.2.2, table 48). */
export interface FieldPointer {
  /** True when the pointer is into the CDB (C/D = 1), false for the parameter list. */
  readonly inCdb: boolean;
  readonly byte: number;
  /** Bit within the byte (sets BPV); absent when the whole byte is meant. */
  readonly bit?: number;
}

export interface SenseInit {
  readonly code: Pick<SenseCode, 'key' | 'asc' | 'ascq'>;
  /** INFORMATION field (e.g. the miscompare offset, SBC-4 5.3); sets VALID. */
  readonly information?: number | bigint;
  readonly fieldPointer?: FieldPointer;
}

export const FIXED_SENSE_LENGTH = 18;

const FIXED_CURRENT = 0x70;
const FIXED_DEFERRED = 0x71;
const DESC_CURRENT = 0x72;
const DESC_DEFERRED = 0x73;
const VALID = 0x80;
const SKSV = 0x80;
const DESC_INFORMATION = 0x00;
const DESC_SENSE_KEY_SPECIFIC = 0x02;
const MAX_U32 = 0xffffffffn;

function sksBytes(fp: FieldPointer): Buffer {
  const b = Buffer.alloc(3);
  let flags = SKSV;
  if (fp.inCdb) flags |= 0x40;
  if (fp.bit !== undefined) flags |= 0x08 | (fp.bit & 0x07);
  b[0] = flags;
  b.writeUInt16BE(fp.byte & 0xffff, 1);
  return b;
}

export function buildSense(init: SenseInit, format: SenseFormat = 'fixed'): Buffer {
  return format === 'fixed' ? buildFixed(init) : buildDescriptor(init);
}

function buildFixed(init: SenseInit): Buffer {
  const b = Buffer.alloc(FIXED_SENSE_LENGTH);
  b[0] = FIXED_CURRENT;
  b[2] = init.code.key & 0x0f;
  // INFORMATION is four bytes in fixed format; a value that does not fit
  // leaves VALID clear (SPC-5 4.4.3).
  if (init.information !== undefined) {
    const info = BigInt(init.information);
    if (info >= 0n && info <= MAX_U32) {
      b[0] |= VALID;
      b.writeUInt32BE(Number(info), 3);
    }
  }
  b[7] = FIXED_SENSE_LENGTH - 8;
  b[12] = init.code.asc;
  b[13] = init.code.ascq;
  if (init.fieldPointer) sksBytes(init.fieldPointer).copy(b, 15);
  return b;
}

function buildDescriptor(init: SenseInit): Buffer {
  const parts: Buffer[] = [];
  if (init.information !== undefined) {
    // Information sense data descriptor (SPC-5 4.4.2.3).
    const d = Buffer.alloc(12);
    d[0] = DESC_INFORMATION;
    d[1] = 0x0a;
    d[2] = VALID;
    d.writeBigUInt64BE(BigInt.asUintN(64, BigInt(init.information)), 4);
    parts.push(d);
  }
  if (init.fieldPointer) {
    // Sense key specific sense data descriptor (SPC-5 4.4.2.4).
    const d = Buffer.alloc(8);
    d[0] = DESC_SENSE_KEY_SPECIFIC;
    d[1] = 0x06;
    sksBytes(init.fieldPointer).copy(d, 4);
    parts.push(d);
  }
  const head = Buffer.alloc(8);
  head[0] = DESC_CURRENT;
  head[1] = init.code.key & 0x0f;
  head[2] = init.code.asc;
  head[3] = init.code.ascq;
  const body = Buffer.concat(parts);
  head[7] = body.length;
  return Buffer.concat([head, body]);
}

export interface Sense {
  readonly format: SenseFormat;
  readonly deferred: boolean;
  readonly key: number;
  readonly asc: number;
  readonly ascq: number;
  readonly information?: bigint;
  readonly fieldPointer?: FieldPointer;
}

function decodeSks(b: Buffer, at: number): FieldPointer | undefined {
  if (b.length < at + 3 || (b[at] & SKSV) === 0) return undefined;
  const bpv = (b[at] & 0x08) !== 0;
  return {
    inCdb: (b[at] & 0x40) !== 0,
    byte: b.readUInt16BE(at + 1),
    ...(bpv ? { bit: b[at] & 0x07 } : {}),
  };
}

/** Decodes fixed or descriptor sense; undefined when the bytes hold neither. */
export function decodeSense(b: Buffer): Sense | undefined {
  if (b.length < 1) return undefined;
  const rc = b[0] & 0x7f;
  if (rc === FIXED_CURRENT || rc === FIXED_DEFERRED) {
    if (b.length < 14) return undefined;
    const valid = (b[0] & VALID) !== 0;
    const fp = b[7] >= 10 ? decodeSks(b, 15) : undefined;
    return {
      format: 'fixed',
      deferred: rc === FIXED_DEFERRED,
      key: b[2] & 0x0f,
      asc: b[12],
      ascq: b[13],
      ...(valid ? { information: BigInt(b.readUInt32BE(3)) } : {}),
      ...(fp ? { fieldPointer: fp } : {}),
    };
  }
  if (rc === DESC_CURRENT || rc === DESC_DEFERRED) {
    if (b.length < 8) return undefined;
    const end = Math.min(b.length, 8 + b[7]);
    let information: bigint | undefined;
    let fieldPointer: FieldPointer | undefined;
    for (let at = 8; at + 2 <= end; at += 2 + b[at + 1]) {
      const type = b[at];
      const len = b[at + 1];
      if (at + 2 + len > end) break;
      if (type === DESC_INFORMATION && len >= 0x0a && (b[at + 2] & VALID) !== 0) {
        information = b.readBigUInt64BE(at + 4);
      } else if (type === DESC_SENSE_KEY_SPECIFIC && len >= 6) {
        fieldPointer = decodeSks(b, at + 4);
      }
    }
    return {
      format: 'descriptor',
      deferred: rc === DESC_DEFERRED,
      key: b[1] & 0x0f,
      asc: b[2],
      ascq: b[3],
      ...(information !== undefined ? { information } : {}),
      ...(fieldPointer ? { fieldPointer } : {}),
    };
  }
  return undefined;
}

export function senseIs(sense: Sense | undefined, code: Pick<SenseCode, 'key' | 'asc' | 'ascq'>): boolean {
  return sense !== undefined && sense.key === code.key && sense.asc === code.asc && sense.ascq === code.ascq;
}

/** "ILLEGAL REQUEST 24/00 INVALID FIELD IN CDB", for logs and error messages. */
export function describeSense(sense: Pick<Sense, 'key' | 'asc' | 'ascq'>): string {
  const hex = (n: number) => n.toString(16).padStart(2, '0').toUpperCase();
  const named = findSenseCode(sense.key, sense.asc, sense.ascq);
  const base = `${senseKeyName(sense.key)} ${hex(sense.asc)}/${hex(sense.ascq)}`;
  return named ? `${base} ${named.name}` : base;
}
