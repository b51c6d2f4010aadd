// The VPD pages rblk serves (SPC-5 7.7, SBC-4 6.6), built from the LU's
// configuration. Page lengths and offsets follow protocol-facts.md section 3.
import { writeAscii } from '../../../protocol/scsi/ascii.js';
import { Association, CodeSet, DesignatorType, ProvisioningType, RBLK_VENDOR, VOLUME_PREFIX } from '../../../protocol/scsi/inquiry.js';
import { DEVICE_TYPE_DISK, VpdPage } from '../../../protocol/scsi/opcodes.js';
import type { LogicalUnit } from '../logical-unit.js';

/** Ascending, as SPC-5 7.7.16 requires and libiscsi checks. */
export const SUPPORTED_VPD_PAGES: readonly number[] = [
  VpdPage.SUPPORTED_PAGES,
  VpdPage.UNIT_SERIAL_NUMBER,
  VpdPage.DEVICE_IDENTIFICATION,
  VpdPage.BLOCK_LIMITS,
  VpdPage.BLOCK_DEVICE_CHARACTERISTICS,
  VpdPage.LOGICAL_BLOCK_PROVISIONING,
];

function page(code: number, body: Buffer): Buffer {
  const head = Buffer.alloc(4);
  head[0] = DEVICE_TYPE_DISK;
  head[1] = code;
  head.writeUInt16BE(body.length, 2);
  return Buffer.concat([head, body]);
}

function designator(codeSet: number, type: number, value: Buffer, association: number = Association.LOGICAL_UNIT): Buffer {
  const d = Buffer.alloc(4 + value.length);
  d[0] = codeSet;
  d[1] = (association << 4) | type;
  d[3] = value.length;
  value.copy(d, 4);
  return d;
}

function deviceIdentification(lu: LogicalUnit): Buffer {
  // T10 vendor ID designator (SPC-5 7.7.6.4): vendor then a vendor-unique id.
  const t10 = Buffer.alloc(8 + lu.serial.length);
  writeAscii(t10, 0, 8, lu.vendor);
  t10.write(lu.serial, 8, 'latin1');
  // SCSI name string (SPC-5 7.7.6.11): NUL-terminated, padded to 4 bytes.
  const name = `naa.${lu.naa.toString('hex').toUpperCase()}`;
  const nameBytes = Buffer.alloc(Math.ceil((name.length + 1) / 4) * 4);
  nameBytes.write(name, 0, 'utf8');
  // rblk's volume name, so an initiator can open a volume by name: a second
  // T10 vendor ID designator, vendor "RBLK", vendor-unique "volume:<name>".
  const named = Buffer.alloc(8 + VOLUME_PREFIX.length + Buffer.byteLength(lu.name, 'latin1'));
  writeAscii(named, 0, 8, RBLK_VENDOR);
  named.write(VOLUME_PREFIX + lu.name, 8, 'latin1');
  const ids = [
    designator(CodeSet.BINARY, DesignatorType.NAA, lu.naa),
    designator(CodeSet.ASCII, DesignatorType.T10_VENDOR_ID, t10),
    designator(CodeSet.ASCII, DesignatorType.T10_VENDOR_ID, named),
    designator(CodeSet.UTF8, DesignatorType.SCSI_NAME_STRING, nameBytes),
  ];
  const groups = lu.portGroups;
  if (groups !== undefined) {
    // The port the command came in through (SPC-4 7.8.6.6, 7.8.6.7): the
    // relative target port and its target port group, both 4 bytes with the
    // number in bytes 2-3. One port per gateway (port-groups.ts).
    const port = Buffer.alloc(4);
    port.writeUInt16BE(groups.local.relativePort, 2);
    const group = Buffer.alloc(4);
    group.writeUInt16BE(groups.local.group, 2);
    ids.push(designator(CodeSet.BINARY, DesignatorType.RELATIVE_TARGET_PORT, port, Association.TARGET_PORT));
    ids.push(designator(CodeSet.BINARY, DesignatorType.TARGET_PORT_GROUP, group, Association.TARGET_PORT));
  }
  return Buffer.concat(ids);
}

function blockLimits(lu: LogicalUnit): Buffer {
  const l = lu.limits;
  const b = Buffer.alloc(0x3c);
  // Offsets below are page offsets minus the 4-byte header (SBC-4 table 236).
  // WSNZ 0: WRITE SAME with zero blocks writes to the end of the medium (write-same.ts).
  b[1] = l.maxCompareAndWriteBlocks;
  b.writeUInt16BE(lu.physicalBlockSize / lu.blockSize, 2);
  b.writeUInt32BE(l.maxTransferBlocks, 4);
  b.writeUInt32BE(l.optimalTransferBlocks, 8);
  if (lu.thin) {
    b.writeUInt32BE(l.maxUnmapLbaCount, 16);
    b.writeUInt32BE(l.maxUnmapDescriptors, 20);
    b.writeUInt32BE(l.unmapGranularity, 24);
    b.writeUInt32BE(0x80000000, 28); // UGAVALID, alignment 0
  }
  b.writeBigUInt64BE(BigInt(l.maxWriteSameBlocks), 32);
  if (lu.atomic) {
    // MAXIMUM ATOMIC TRANSFER LENGTH, ATOMIC ALIGNMENT, ATOMIC TRANSFER LENGTH GRANULARITY;
    // the two ATOMIC BOUNDARY limits stay 0: no atomic boundaries (write-atomic.ts).
    b.writeUInt32BE(lu.atomic.maxBlocks, 40);
    b.writeUInt32BE(lu.atomic.alignment, 44);
    b.writeUInt32BE(lu.atomic.granularity, 48);
  }
  return b;
}

function blockDeviceCharacteristics(lu: LogicalUnit): Buffer {
  const b = Buffer.alloc(0x3c);
  // MEDIUM ROTATION RATE 1 = non-rotating; 0 = not reported (SBC-4 table 229).
  b.writeUInt16BE(lu.rotational ? 0 : 1, 0);
  return b;
}

function logicalBlockProvisioning(lu: LogicalUnit): Buffer {
  const b = Buffer.alloc(4);
  if (lu.thin) {
    // LBPU, LBPWS, LBPWS10, LBPRZ: UNMAP and both WRITE SAMEs deallocate, and
    // deallocated blocks read back as zeroes (Backend.discard's contract).
    b[1] = 0x80 | 0x40 | 0x20 | 0x04;
    b[2] = ProvisioningType.THIN;
  } else {
    b[2] = ProvisioningType.FULL;
  }
  return b;
}

export function buildVpdPage(code: number, lu: LogicalUnit): Buffer | undefined {
  switch (code) {
    case VpdPage.SUPPORTED_PAGES:
      return page(code, Buffer.from(SUPPORTED_VPD_PAGES));
    case VpdPage.UNIT_SERIAL_NUMBER:
      return page(code, Buffer.from(lu.serial, 'latin1'));
    case VpdPage.DEVICE_IDENTIFICATION:
      return page(code, deviceIdentification(lu));
    case VpdPage.BLOCK_LIMITS:
      return page(code, blockLimits(lu));
    case VpdPage.BLOCK_DEVICE_CHARACTERISTICS:
      return page(code, blockDeviceCharacteristics(lu));
    case VpdPage.LOGICAL_BLOCK_PROVISIONING:
      return page(code, logicalBlockProvisioning(lu));
    default:
      return undefined;
  }
}
