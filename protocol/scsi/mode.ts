// Mode parameter lists (SPC-5 7.5): parsing MODE SENSE data and building MODE
// SELECT parameter lists, plus the bits of the pages rblk supports: Caching
// (SBC-4 6.5.5) and Control (SPC-5 7.5.8).
import { ModePage } from './opcodes.js';

/** DEVICE-SPECIFIC PARAMETER bits for direct-access devices (SBC-4 6.5.2). */
export const DeviceSpecific = { WP: 0x80, DPOFUA: 0x10 } as const;

/** Caching mode page byte 2 (SBC-4 6.5.5, table 221). */
export const CachingBits = { WCE: 0x04, RCD: 0x01 } as const;
export const CACHING_PAGE_LENGTH = 0x14;

/** Control mode page byte 2 and byte 4 (SPC-5 7.5.8, table 455). */
export const ControlBits = { D_SENSE: 0x04, GLTSD: 0x02, SWP: 0x08 } as const;
export const CONTROL_PAGE_LENGTH = 0x0c;

export interface BlockDescriptor {
  blocks: bigint;
  blockLength: number;
}

export interface ModePageData {
  code: number;
  subpage?: number;
  /** PS: the page can be saved. */
  saveable: boolean;
  /** The whole page, header included. */
  bytes: Buffer;
}

export interface ModeParameters {
  mediumType: number;
  writeProtect: boolean;
  dpoFua: boolean;
  blockDescriptors: BlockDescriptor[];
  pages: ModePageData[];
}

function parsePages(b: Buffer, at: number, end: number): ModePageData[] {
  const pages: ModePageData[] = [];
  while (at + 2 <= end) {
    const spf = (b[at] & 0x40) !== 0;
    const headerLen = spf ? 4 : 2;
    if (at + headerLen > end) break;
    const len = spf ? b.readUInt16BE(at + 2) : b[at + 1];
    const total = headerLen + len;
    if (at + total > end) break;
    pages.push({
      code: b[at] & 0x3f,
      ...(spf ? { subpage: b[at + 1] } : {}),
      saveable: (b[at] & 0x80) !== 0,
      bytes: Buffer.from(b.subarray(at, at + total)),
    });
    at += total;
  }
  return pages;
}

// Direct-access block descriptors (SBC-4 6.4.2): the short form holds a 4-byte
// block count, the long form (LONGLBA) an 8-byte one.
function parseDescriptors(b: Buffer, at: number, len: number, long: boolean): BlockDescriptor[] {
  const size = long ? 16 : 8;
  const out: BlockDescriptor[] = [];
  for (let p = at; p + size <= at + len && p + size <= b.length; p += size) {
    out.push(
      long
        ? { blocks: b.readBigUInt64BE(p), blockLength: b.readUInt32BE(p + 12) }
        : { blocks: BigInt(b.readUInt32BE(p)), blockLength: b.readUIntBE(p + 5, 3) },
    );
  }
  return out;
}

export function parseModeSense6(b: Buffer): ModeParameters {
  if (b.length < 4) throw new RangeError(`MODE SENSE(6) data is ${b.length} bytes; the header alone is 4`);
  const end = Math.min(b.length, b[0] + 1);
  const bdl = b[3];
  return {
    mediumType: b[1],
    writeProtect: (b[2] & DeviceSpecific.WP) !== 0,
    dpoFua: (b[2] & DeviceSpecific.DPOFUA) !== 0,
    blockDescriptors: parseDescriptors(b, 4, bdl, false),
    pages: parsePages(b, 4 + bdl, end),
  };
}

export function parseModeSense10(b: Buffer): ModeParameters {
  if (b.length < 8) throw new RangeError(`MODE SENSE(10) data is ${b.length} bytes; the header alone is 8`);
  const end = Math.min(b.length, b.readUInt16BE(0) + 2);
  const bdl = b.readUInt16BE(6);
  return {
    mediumType: b[2],
    writeProtect: (b[3] & DeviceSpecific.WP) !== 0,
    dpoFua: (b[3] & DeviceSpecific.DPOFUA) !== 0,
    blockDescriptors: parseDescriptors(b, 8, bdl, (b[4] & 0x01) !== 0),
    pages: parsePages(b, 8 + bdl, end),
  };
}

export function findModePage(p: ModeParameters, code: number): Buffer | undefined {
  return p.pages.find((x) => x.code === code && x.subpage === undefined)?.bytes;
}

export interface CachingPage {
  writeCacheEnabled: boolean;
  readCacheDisabled: boolean;
}

export function parseCachingPage(page: Buffer): CachingPage {
  if ((page[0] & 0x3f) !== ModePage.CACHING || page.length < 3) throw new RangeError('not a Caching mode page');
  return {
    writeCacheEnabled: (page[2] & CachingBits.WCE) !== 0,
    readCacheDisabled: (page[2] & CachingBits.RCD) !== 0,
  };
}

export interface ControlPage {
  descriptorSense: boolean;
  softwareWriteProtect: boolean;
  queueAlgorithmModifier: number;
}

export function parseControlPage(page: Buffer): ControlPage {
  if ((page[0] & 0x3f) !== ModePage.CONTROL || page.length < 5) throw new RangeError('not a Control mode page');
  return {
    descriptorSense: (page[2] & ControlBits.D_SENSE) !== 0,
    softwareWriteProtect: (page[4] & ControlBits.SWP) !== 0,
    queueAlgorithmModifier: page[3] >> 4,
  };
}

/** A MODE SELECT(6) parameter list: empty header, no block descriptors, the pages with PS cleared. */
export function modeSelectList6(pages: readonly Buffer[]): Buffer {
  return Buffer.concat([Buffer.alloc(4), ...pages.map(clearPs)]);
}

export function modeSelectList10(pages: readonly Buffer[]): Buffer {
  return Buffer.concat([Buffer.alloc(8), ...pages.map(clearPs)]);
}

// PS is reserved in MODE SELECT (SPC-5 7.5.7).
function clearPs(page: Buffer): Buffer {
  const copy = Buffer.from(page);
  copy[0] &= 0x7f;
  return copy;
}
