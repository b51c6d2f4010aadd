// PERSISTENT RESERVE IN parameter data (SPC-5 6.16) and the TransportID that
// names an initiator in READ FULL STATUS (SPC-5 7.6.4).
import { PrType, isPrType, type PrTypeCode } from './opcodes.js';

export interface ReadKeys {
  generation: number;
  keys: bigint[];
}

export function parseReadKeys(b: Buffer): ReadKeys {
  if (b.length < 8) throw new RangeError(`READ KEYS data is ${b.length} bytes; the header alone is 8`);
  const end = Math.min(b.length, 8 + b.readUInt32BE(4));
  const keys: bigint[] = [];
  for (let at = 8; at + 8 <= end; at += 8) keys.push(b.readBigUInt64BE(at));
  return { generation: b.readUInt32BE(0), keys };
}

export interface ReservationInfo {
  /** Zero for the all-registrants types (SPC-5 6.16.3). */
  key: bigint;
  scope: number;
  type: number;
}

export interface ReadReservation {
  generation: number;
  reservation?: ReservationInfo;
}

export function parseReadReservation(b: Buffer): ReadReservation {
  if (b.length < 8) throw new RangeError(`READ RESERVATION data is ${b.length} bytes; the header alone is 8`);
  const generation = b.readUInt32BE(0);
  if (b.readUInt32BE(4) < 16) return { generation };
  if (b.length < 24) throw new RangeError(`READ RESERVATION data is ${b.length} bytes; the reservation needs 24`);
  return { generation, reservation: { key: b.readBigUInt64BE(8), scope: b[21] >> 4, type: b[21] & 0x0f } };
}

/** Where each type sits in the PERSISTENT RESERVATION TYPE MASK (SPC-5 6.16.4, table 195). */
export const PR_TYPE_MASK: Readonly<Record<PrTypeCode, { byte: number; bit: number }>> = {
  [PrType.WRITE_EXCLUSIVE_ALL_REGISTRANTS]: { byte: 4, bit: 0x80 },
  [PrType.EXCLUSIVE_ACCESS_REGISTRANTS_ONLY]: { byte: 4, bit: 0x40 },
  [PrType.WRITE_EXCLUSIVE_REGISTRANTS_ONLY]: { byte: 4, bit: 0x20 },
  [PrType.EXCLUSIVE_ACCESS]: { byte: 4, bit: 0x08 },
  [PrType.WRITE_EXCLUSIVE]: { byte: 4, bit: 0x02 },
  [PrType.EXCLUSIVE_ACCESS_ALL_REGISTRANTS]: { byte: 5, bit: 0x01 },
};

export interface ReportCapabilities {
  /** Compatible reservation handling (RESERVE(6)/RELEASE(6) interplay). */
  crh: boolean;
  specifyInitiatorPortsCapable: boolean;
  allTargetPortsCapable: boolean;
  persistThroughPowerLossCapable: boolean;
  typeMaskValid: boolean;
  allowCommands: number;
  persistThroughPowerLossActivated: boolean;
  types: PrTypeCode[];
}

export function parseReportCapabilities(b: Buffer): ReportCapabilities {
  if (b.length < 8) throw new RangeError(`REPORT CAPABILITIES data is ${b.length} bytes; 8 are needed`);
  const types: PrTypeCode[] = [];
  for (const [t, m] of Object.entries(PR_TYPE_MASK)) {
    const type = Number(t);
    if (isPrType(type) && (b[m.byte] & m.bit) !== 0) types.push(type);
  }
  types.sort((x, y) => x - y);
  return {
    crh: (b[2] & 0x10) !== 0,
    specifyInitiatorPortsCapable: (b[2] & 0x08) !== 0,
    allTargetPortsCapable: (b[2] & 0x04) !== 0,
    persistThroughPowerLossCapable: (b[2] & 0x01) !== 0,
    typeMaskValid: (b[3] & 0x80) !== 0,
    allowCommands: (b[3] >> 4) & 0x07,
    persistThroughPowerLossActivated: (b[3] & 0x01) !== 0,
    types,
  };
}

export interface FullStatusEntry {
  key: bigint;
  allTargetPorts: boolean;
  holder: boolean;
  scope: number;
  type: number;
  relativeTargetPort: number;
  transportId: Buffer;
}

export interface ReadFullStatus {
  generation: number;
  entries: FullStatusEntry[];
}

export function parseReadFullStatus(b: Buffer): ReadFullStatus {
  if (b.length < 8) throw new RangeError(`READ FULL STATUS data is ${b.length} bytes; the header alone is 8`);
  const end = Math.min(b.length, 8 + b.readUInt32BE(4));
  const entries: FullStatusEntry[] = [];
  for (let at = 8; at + 24 <= end; ) {
    const idLen = b.readUInt32BE(at + 20);
    if (at + 24 + idLen > end) break;
    entries.push({
      key: b.readBigUInt64BE(at),
      allTargetPorts: (b[at + 12] & 0x02) !== 0,
      holder: (b[at + 12] & 0x01) !== 0,
      scope: b[at + 13] >> 4,
      type: b[at + 13] & 0x0f,
      relativeTargetPort: b.readUInt16BE(at + 18),
      transportId: Buffer.from(b.subarray(at + 24, at + 24 + idLen)),
    });
    at += 24 + idLen;
  }
  return { generation: b.readUInt32BE(0), entries };
}

/**
 * rblk names initiators with strings, so it uses the name-carrying TransportID
 * layout (protocol identifier 5, format 00b, SPC-5 7.6.4.6): a NUL-terminated
 * UTF-8 name padded to a multiple of four, at least 20 bytes in all.
 */
export const NAME_TRANSPORT_PROTOCOL = 0x05;

export function encodeNameTransportId(name: string): Buffer {
  const bytes = Buffer.from(name, 'utf8');
  const padded = Math.max(16, Math.ceil((bytes.length + 1) / 4) * 4);
  const b = Buffer.alloc(4 + padded);
  b[0] = NAME_TRANSPORT_PROTOCOL;
  b.writeUInt16BE(padded, 2);
  bytes.copy(b, 4);
  return b;
}

export function decodeNameTransportId(b: Buffer): string | undefined {
  if (b.length < 4 || (b[0] & 0x0f) !== NAME_TRANSPORT_PROTOCOL) return undefined;
  const body = b.subarray(4, Math.min(b.length, 4 + b.readUInt16BE(2)));
  const nul = body.indexOf(0);
  return body.subarray(0, nul < 0 ? body.length : nul).toString('utf8');
}
