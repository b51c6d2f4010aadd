// What a LUN holds, asked the way Linux sd asks: REPORT LUNS (SPC-5 6.33),
// standard INQUIRY and the VPD pages (SPC-5 6.7, 7.7; SBC-4 6.6), READ
// CAPACITY(16) (SBC-4 5.21) and the mode parameter header's WP bit
// (SBC-4 6.4.1), which also reflects read-only access from an ACL.
import { inquiry, modeSense6, readCapacity16, reportLuns } from '../protocol/scsi/cdb.js';
import {
  CodeSet,
  DesignatorType,
  parseBlockLimits,
  parseDeviceIdentification,
  parseLogicalBlockProvisioning,
  parseStandardInquiry,
  parseSupportedVpdPages,
  parseUnitSerialNumber,
  RBLK_VENDOR,
  VOLUME_PREFIX,
  type Designator,
} from '../protocol/scsi/inquiry.js';
import { parseModeSense6 } from '../protocol/scsi/mode.js';
import { DEVICE_TYPE_DISK, ModePage, VpdPage } from '../protocol/scsi/opcodes.js';
import { parseReadCapacity16 } from '../protocol/scsi/read-capacity.js';
import { parseReportLuns } from '../protocol/scsi/report-luns.js';
import { RblkError } from './errors.js';
import type { ScsiRequest, ScsiResponse } from './scsi-request.js';


/** One volume as `session.volumes()` reports it. */
export interface VolumeInfo {
  lun: number;
  /** The name rblkd exports it under (VPD 83h); `lun<N>` when the target gives none. */
  name: string;
  /** Bytes. */
  size: number;
  /** 512 or 4096. */
  blockSize: number;
  /** Writes are refused: a read-only volume, or read-only access for this initiator. */
  readOnly: boolean;
  /** Thin provisioned: discard() deallocates (VPD B2h LBPU). */
  thin: boolean;
  /** Unit serial number (VPD 80h). */
  serial: string;
  /** A world-wide name that never changes for the volume: `naa.<32 hex digits>` (VPD 83h). */
  id: string;
  vendor: string;
  product: string;
}

/** Block limits from VPD B0h, in blocks; 0 means "no limit reported". */
export interface VolumeLimits {
  maxTransferBlocks: number;
  maxCompareAndWriteBlocks: number;
  maxUnmapBlocks: number;
  maxUnmapDescriptors: number;
  maxWriteSameBlocks: number;
}

export interface Probe {
  info: VolumeInfo;
  limits: VolumeLimits;
}

/** Runs one command and resolves only on GOOD (the session's `command`). */
export type RunCommand = (req: ScsiRequest) => Promise<ScsiResponse>;

async function dataIn(run: RunCommand, lun: number, cdb: Buffer, length: number, what: string): Promise<Buffer> {
  const into = Buffer.alloc(length);
  const r = await run({ lun, cdb, dataIn: { kind: 'bytes', into }, idempotent: true, what });
  return into.subarray(0, r.dataIn);
}

/** The LUNs the target shows this initiator, in its order. */
export async function listLuns(run: RunCommand): Promise<number[]> {
  let length = 8 + 8 * 64;
  for (;;) {
    const list = parseReportLuns(await dataIn(run, 0, reportLuns(length), length, 'REPORT LUNS'));
    if (list.luns.length >= list.total) return list.luns;
    length = 8 + 8 * list.total;
  }
}

function t10VolumeName(d: Designator): string | undefined {
  if (d.type !== DesignatorType.T10_VENDOR_ID || d.value.length < 8) return undefined;
  if (d.value.subarray(0, 8).toString('latin1').trimEnd() !== RBLK_VENDOR) return undefined;
  const unique = d.value.subarray(8).toString('latin1');
  return unique.startsWith(VOLUME_PREFIX) ? unique.slice(VOLUME_PREFIX.length) : undefined;
}

function worldWideName(ds: Designator[], serial: string): string {
  const naa = ds.find((d) => d.type === DesignatorType.NAA);
  if (naa) return `naa.${naa.value.toString('hex')}`;
  const scsiName = ds.find((d) => d.type === DesignatorType.SCSI_NAME_STRING && d.codeSet === CodeSet.UTF8);
  if (scsiName) return scsiName.value.toString('utf8').replace(/\0+$/, '').toLowerCase();
  return serial;
}

/**
 * The mode parameter header's WP bit. Another initiator's Exclusive Access
 * reservation makes MODE SENSE a RESERVATION CONFLICT (SPC-5 5.14.1, table of
 * commands allowed under reservations); as Linux sd does, that LU is then taken
 * as write-enabled, and its writes meet the conflict themselves. A reservation on
 * one LU never makes another LU, or the listing, fail.
 */
async function modeWriteProtect(run: RunCommand, lun: number): Promise<boolean> {
  try {
    return parseModeSense6(await dataIn(run, lun, modeSense6({ page: ModePage.CACHING, dbd: true, allocationLength: 255 }), 255, `MODE SENSE(6) of LUN ${lun}`)).writeProtect;
  } catch (e) {
    if (e instanceof RblkError && e.code === 'RESERVATION_CONFLICT') return false;
    throw e;
  }
}

/**
 * The name rblkd exports a LUN under, from INQUIRY and VPD 83h only: commands
 * every reservation allows, so finding a volume by name touches no other LU's
 * medium. Undefined when the LUN holds no disk or names none.
 */
export async function lunVolumeName(run: RunCommand, lun: number): Promise<string | undefined> {
  const std = parseStandardInquiry(await dataIn(run, lun, inquiry(96), 96, `INQUIRY of LUN ${lun}`));
  if (std.peripheralQualifier !== 0 || std.deviceType !== DEVICE_TYPE_DISK) return undefined;
  const pages = parseSupportedVpdPages(await dataIn(run, lun, inquiry(255, VpdPage.SUPPORTED_PAGES), 255, `VPD 00h of LUN ${lun}`));
  if (!pages.includes(VpdPage.DEVICE_IDENTIFICATION)) return `lun${lun}`;
  const ids = parseDeviceIdentification(await dataIn(run, lun, inquiry(1024, VpdPage.DEVICE_IDENTIFICATION), 1024, `VPD 83h of LUN ${lun}`));
  return ids.map(t10VolumeName).find((n) => n !== undefined) ?? `lun${lun}`;
}

/** Everything about one LUN; undefined when the target has no volume there. */
export async function probeLun(run: RunCommand, lun: number): Promise<Probe | undefined> {
  const std = parseStandardInquiry(await dataIn(run, lun, inquiry(96), 96, `INQUIRY of LUN ${lun}`));
  // Peripheral qualifier 011b: no logical unit here (SPC-5 6.7.2).
  if (std.peripheralQualifier !== 0 || std.deviceType !== DEVICE_TYPE_DISK) return undefined;
  const pages = parseSupportedVpdPages(await dataIn(run, lun, inquiry(255, VpdPage.SUPPORTED_PAGES), 255, `VPD 00h of LUN ${lun}`));
  const vpd = (page: number, length: number): Promise<Buffer> => dataIn(run, lun, inquiry(length, page), length, `VPD ${page.toString(16)}h of LUN ${lun}`);
  const serial = pages.includes(VpdPage.UNIT_SERIAL_NUMBER) ? parseUnitSerialNumber(await vpd(VpdPage.UNIT_SERIAL_NUMBER, 255)) : '';
  const ids = pages.includes(VpdPage.DEVICE_IDENTIFICATION) ? parseDeviceIdentification(await vpd(VpdPage.DEVICE_IDENTIFICATION, 1024)) : [];
  const limits: VolumeLimits = { maxTransferBlocks: 0, maxCompareAndWriteBlocks: 0, maxUnmapBlocks: 0, maxUnmapDescriptors: 0, maxWriteSameBlocks: 0 };
  if (pages.includes(VpdPage.BLOCK_LIMITS)) {
    const b = parseBlockLimits(await vpd(VpdPage.BLOCK_LIMITS, 64));
    limits.maxTransferBlocks = b.maxTransferLength;
    limits.maxCompareAndWriteBlocks = b.maxCompareAndWriteLength;
    limits.maxUnmapBlocks = b.maxUnmapLbaCount;
    limits.maxUnmapDescriptors = b.maxUnmapBlockDescriptorCount;
    limits.maxWriteSameBlocks = b.maxWriteSameLength;
  }
  const thin = pages.includes(VpdPage.LOGICAL_BLOCK_PROVISIONING) && parseLogicalBlockProvisioning(await vpd(VpdPage.LOGICAL_BLOCK_PROVISIONING, 64)).lbpu;
  const cap = parseReadCapacity16(await dataIn(run, lun, readCapacity16(32), 32, `READ CAPACITY(16) of LUN ${lun}`));
  const writeProtect = await modeWriteProtect(run, lun);
  const name = ids.map(t10VolumeName).find((n) => n !== undefined) ?? `lun${lun}`;
  return {
    info: {
      lun,
      name,
      size: Number(cap.blocks) * cap.blockSize,
      blockSize: cap.blockSize,
      readOnly: writeProtect,
      thin,
      serial,
      id: worldWideName(ids, serial),
      vendor: std.vendor,
      product: std.product,
    },
    limits,
  };
}

/** The capacity in bytes and the block size (READ CAPACITY(16)). */
export async function readCapacity(run: RunCommand, lun: number): Promise<{ size: number; blockSize: number }> {
  const cap = parseReadCapacity16(await dataIn(run, lun, readCapacity16(32), 32, `READ CAPACITY(16) of LUN ${lun}`));
  return { size: Number(cap.blocks) * cap.blockSize, blockSize: cap.blockSize };
}
