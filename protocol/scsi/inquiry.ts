// Parsers for INQUIRY data: the standard page (SPC-5 6.7.2) and the VPD pages
// rblk serves: 00h (SPC-5 7.7.16), 80h (7.7.18), 83h (7.7.6), B0h block limits
// (SBC-4 6.6.4), B1h block device characteristics (6.6.2) and B2h logical
// block provisioning (6.6.7). Short or mismatched input throws RangeError.
import { readAscii } from './ascii.js';
import { VpdPage } from './opcodes.js';

export interface StandardInquiry {
  peripheralQualifier: number;
  deviceType: number;
  removable: boolean;
  version: number;
  normAca: boolean;
  hiSup: boolean;
  responseDataFormat: number;
  additionalLength: number;
  protect: boolean;
  tpgs: number;
  threePc: boolean;
  cmdQue: boolean;
  vendor: string;
  product: string;
  revision: string;
}

export function parseStandardInquiry(b: Buffer): StandardInquiry {
  if (b.length < 36) throw new RangeError(`standard INQUIRY data is ${b.length} bytes; at least 36 are needed`);
  return {
    peripheralQualifier: b[0] >> 5,
    deviceType: b[0] & 0x1f,
    removable: (b[1] & 0x80) !== 0,
    version: b[2],
    normAca: (b[3] & 0x20) !== 0,
    hiSup: (b[3] & 0x10) !== 0,
    responseDataFormat: b[3] & 0x0f,
    additionalLength: b[4],
    protect: (b[5] & 0x01) !== 0,
    tpgs: (b[5] >> 4) & 0x3,
    threePc: (b[5] & 0x08) !== 0,
    cmdQue: (b[7] & 0x02) !== 0,
    vendor: readAscii(b, 8, 8),
    product: readAscii(b, 16, 16),
    revision: readAscii(b, 32, 4),
  };
}

/** The page body after the 4-byte VPD header, bounded by the PAGE LENGTH field. */
function vpdBody(b: Buffer, page: number, minBody = 0): Buffer {
  if (b.length < 4) throw new RangeError(`VPD page ${hex(page)} data is ${b.length} bytes; the header alone is 4`);
  if (b[1] !== page) throw new RangeError(`expected VPD page ${hex(page)}, got ${hex(b[1])}`);
  const body = b.subarray(4, Math.min(b.length, 4 + b.readUInt16BE(2)));
  if (body.length < minBody) {
    throw new RangeError(`VPD page ${hex(page)} holds ${body.length} bytes; at least ${minBody} are needed`);
  }
  return body;
}

function hex(n: number): string {
  return `${n.toString(16).padStart(2, '0').toUpperCase()}h`;
}

export function parseSupportedVpdPages(b: Buffer): number[] {
  return [...vpdBody(b, VpdPage.SUPPORTED_PAGES)];
}

export function parseUnitSerialNumber(b: Buffer): string {
  return vpdBody(b, VpdPage.UNIT_SERIAL_NUMBER).toString('latin1').replace(/[\0 ]+$/, '').replace(/^ +/, '');
}

/** CODE SET (SPC-5 7.7.6.1, table 575). */
export const CodeSet = { BINARY: 1, ASCII: 2, UTF8: 3 } as const;
/** ASSOCIATION (table 576). */
export const Association = { LOGICAL_UNIT: 0, TARGET_PORT: 1, TARGET_DEVICE: 2 } as const;
/** DESIGNATOR TYPE (table 577). */
export const DesignatorType = {
  VENDOR_SPECIFIC: 0,
  T10_VENDOR_ID: 1,
  EUI64: 2,
  NAA: 3,
  RELATIVE_TARGET_PORT: 4,
  TARGET_PORT_GROUP: 5,
  LOGICAL_UNIT_GROUP: 6,
  MD5_LOGICAL_UNIT: 7,
  SCSI_NAME_STRING: 8,
} as const;

export interface Designator {
  protocolIdentifier: number;
  codeSet: number;
  piv: boolean;
  association: number;
  type: number;
  value: Buffer;
}

export function parseDeviceIdentification(b: Buffer): Designator[] {
  const body = vpdBody(b, VpdPage.DEVICE_IDENTIFICATION);
  const out: Designator[] = [];
  for (let at = 0; at + 4 <= body.length; ) {
    const len = body[at + 3];
    if (at + 4 + len > body.length) throw new RangeError(`designator at ${at + 4} runs past the page end`);
    out.push({
      protocolIdentifier: body[at] >> 4,
      codeSet: body[at] & 0x0f,
      piv: (body[at + 1] & 0x80) !== 0,
      association: (body[at + 1] >> 4) & 0x3,
      type: body[at + 1] & 0x0f,
      value: Buffer.from(body.subarray(at + 4, at + 4 + len)),
    });
    at += 4 + len;
  }
  return out;
}

export interface BlockLimits {
  /** WRITE SAME NUMBER OF LOGICAL BLOCKS must be non-zero. */
  wsnz: boolean;
  maxCompareAndWriteLength: number;
  optimalTransferLengthGranularity: number;
  maxTransferLength: number;
  optimalTransferLength: number;
  maxPrefetchLength: number;
  maxUnmapLbaCount: number;
  maxUnmapBlockDescriptorCount: number;
  optimalUnmapGranularity: number;
  unmapGranularityAlignmentValid: boolean;
  unmapGranularityAlignment: number;
  maxWriteSameLength: number;
}

export function parseBlockLimits(b: Buffer): BlockLimits {
  const body = vpdBody(b, VpdPage.BLOCK_LIMITS, 12);
  // Offsets below are within the whole page (SBC-4 table 236); fields past a
  // short page's end read as zero, which SBC-4 defines as "no limit reported".
  const page = Buffer.alloc(64);
  b.copy(page, 0, 0, Math.min(64, 4 + body.length));
  return {
    wsnz: (page[4] & 0x01) !== 0,
    maxCompareAndWriteLength: page[5],
    optimalTransferLengthGranularity: page.readUInt16BE(6),
    maxTransferLength: page.readUInt32BE(8),
    optimalTransferLength: page.readUInt32BE(12),
    maxPrefetchLength: page.readUInt32BE(16),
    maxUnmapLbaCount: page.readUInt32BE(20),
    maxUnmapBlockDescriptorCount: page.readUInt32BE(24),
    optimalUnmapGranularity: page.readUInt32BE(28),
    unmapGranularityAlignmentValid: (page[32] & 0x80) !== 0,
    unmapGranularityAlignment: page.readUInt32BE(32) & 0x7fffffff,
    maxWriteSameLength: Number(page.readBigUInt64BE(36)),
  };
}

export interface BlockDeviceCharacteristics {
  /** 1 = non-rotating medium (SSD), 0 = not reported, else rpm. */
  rotationRate: number;
  nominalFormFactor: number;
}

export function parseBlockDeviceCharacteristics(b: Buffer): BlockDeviceCharacteristics {
  const body = vpdBody(b, VpdPage.BLOCK_DEVICE_CHARACTERISTICS, 4);
  return { rotationRate: body.readUInt16BE(0), nominalFormFactor: body[3] & 0x0f };
}

export const ProvisioningType = { FULL: 0, RESOURCE: 1, THIN: 2 } as const;

export interface LogicalBlockProvisioning {
  thresholdExponent: number;
  /** UNMAP supported. */
  lbpu: boolean;
  /** WRITE SAME(16) with UNMAP supported. */
  lbpws: boolean;
  /** WRITE SAME(10) with UNMAP supported. */
  lbpws10: boolean;
  /** Unmapped blocks read back as zeroes. */
  lbprz: boolean;
  anchorSupported: boolean;
  descriptorPresent: boolean;
  provisioningType: number;
}

export function parseLogicalBlockProvisioning(b: Buffer): LogicalBlockProvisioning {
  const body = vpdBody(b, VpdPage.LOGICAL_BLOCK_PROVISIONING, 3);
  return {
    thresholdExponent: body[0],
    lbpu: (body[1] & 0x80) !== 0,
    lbpws: (body[1] & 0x40) !== 0,
    lbpws10: (body[1] & 0x20) !== 0,
    lbprz: (body[1] & 0x04) !== 0,
    anchorSupported: (body[1] & 0x02) !== 0,
    descriptorPresent: (body[1] & 0x01) !== 0,
    provisioningType: body[2] & 0x07,
  };
}

/**
 * rblk's volume name in VPD 83h: a T10 vendor ID designator (SPC-5 7.7.6.4)
 * whose vendor is "RBLK" and whose vendor-specific part is "volume:<name>".
 * The target builds it (target/scsi/commands/vpd.ts); initiators find volumes by it.
 */
export const RBLK_VENDOR = 'RBLK';
export const VOLUME_PREFIX = 'volume:';
