// The NVMe submission and completion queue entries as fabrics carry them
// (NVMe Base 2.0 §4.2 Common Command Format, §4.6 Completion Queue Entry,
// §4.3.2 SGL; NVMe over Fabrics 1.1 §2.1 capsules, §3.3 Fabrics commands).
// Little-endian throughout (Base §1.5 conventions).

/** Admin opcodes (Base 2.0 §5, Figure "Opcodes for Admin Commands"). */
export const AdminOpcode = {
  GetLogPage: 0x02,
  Identify: 0x06,
  Abort: 0x08,
  SetFeatures: 0x09,
  GetFeatures: 0x0a,
  AsyncEventRequest: 0x0c,
  KeepAlive: 0x18,
  Fabrics: 0x7f,
} as const;

/** NVM command set I/O opcodes (NVM Command Set 1.0 §3, Figure "Opcodes for NVM Commands"). */
export const IoOpcode = {
  Flush: 0x00,
  Write: 0x01,
  Read: 0x02,
  Compare: 0x05,
  WriteZeroes: 0x08,
  DatasetManagement: 0x09,
  Verify: 0x0c,
  /** Reservation commands (NVM Command Set 1.0 §3.2.5-§3.2.8; Base 2.0 §8.19). */
  ReservationRegister: 0x0d,
  ReservationReport: 0x0e,
  ReservationAcquire: 0x11,
  ReservationRelease: 0x15,
} as const;

/** Fabrics Command Type, SQE byte 4 of opcode 7Fh (NVMe-oF 1.1 §3.1, Figure "Fabrics Command Type"). */
export const FabricsType = {
  PropertySet: 0x00,
  Connect: 0x01,
  PropertyGet: 0x04,
  AuthSend: 0x05,
  AuthReceive: 0x06,
  Disconnect: 0x08,
} as const;

/** Properties (NVMe-oF 1.1 §3.4.1 / Base 2.0 §3.1.4 controller registers): offsets. */
export const Property = {
  CAP: 0x00,
  VS: 0x08,
  CC: 0x14,
  CSTS: 0x1c,
} as const;

export const SQE_LENGTH = 64;
export const CQE_LENGTH = 16;
export const CONNECT_DATA_LENGTH = 1024;
export const DISCOVERY_NQN = 'nqn.2014-08.org.nvmexpress.discovery';

/** SGL descriptor identifier byte 15 (Base 2.0 §4.3.2, Figure "SGL Descriptor Type"): type bits 7:4, subtype bits 3:0. */
export const SglId = {
  /** Data Block (0h), Offset subtype (1h): in-capsule data at an offset (NVMe-oF 1.1 §2.3.1; TCP 1.0 §3.3.1). */
  InCapsule: 0x01,
  /** Transport SGL Data Block (5h), Transport Specific subtype (Ah): data moved by R2T/H2CData or C2HData (TCP 1.0 §3.3.1). */
  TransportData: 0x5a,
} as const;

/** The fields every SQE has (Base 2.0 §4.2, Figure "Common Command Format"). */
export interface Sqe {
  /** CDW0 byte 0. */
  opcode: number;
  /** CDW0 byte 1 bits 1:0 FUSE. */
  fuse: number;
  /** CDW0 byte 1 bits 7:6 PSDT (10b: SGL, required on fabrics, NVMe-oF 1.1 §2.1). */
  psdt: number;
  /** CDW0 bytes 2-3. */
  cid: number;
  /** Bytes 4-7 (the Fabrics command type is byte 4 of opcode 7Fh). */
  nsid: number;
  /** DPTR SGL1, bytes 24-39: address 24-31, length 32-35, identifier byte 39. */
  sglAddress: bigint;
  sglLength: number;
  sglId: number;
  raw: Buffer;
}

export function parseSqe(b: Buffer): Sqe {
  return {
    opcode: b[0],
    fuse: b[1] & 0x03,
    psdt: b[1] >> 6,
    cid: b.readUInt16LE(2),
    nsid: b.readUInt32LE(4),
    sglAddress: b.readBigUInt64LE(24),
    sglLength: b.readUInt32LE(32),
    sglId: b[39],
    raw: b,
  };
}

/** CDWn of an SQE (Base 2.0 §4.2: CDW10 at byte 40 ... CDW15 at byte 60). */
export function cdw(sqe: Buffer, n: 10 | 11 | 12 | 13 | 14 | 15): number {
  return sqe.readUInt32LE(40 + (n - 10) * 4);
}

/** A new SQE: opcode, CID, NSID, PSDT 10b (SGL), SGL1 as given (host side). */
export function buildSqe(o: { opcode: number; cid: number; nsid?: number; sgl?: { id: number; address?: bigint; length: number }; cdw?: Partial<Record<10 | 11 | 12 | 13 | 14 | 15, number>> }): Buffer {
  const b = Buffer.alloc(SQE_LENGTH);
  b[0] = o.opcode;
  b[1] = 0x80;
  b.writeUInt16LE(o.cid, 2);
  b.writeUInt32LE((o.nsid ?? 0) >>> 0, 4);
  if (o.sgl) {
    b.writeBigUInt64LE(o.sgl.address ?? 0n, 24);
    b.writeUInt32LE(o.sgl.length, 32);
    b[39] = o.sgl.id;
  }
  for (const [k, v] of Object.entries(o.cdw ?? {})) b.writeUInt32LE(v >>> 0, 40 + (Number(k) - 10) * 4);
  return b;
}

/** Status Code Type (Base 2.0 §4.6.1.2, Figure "Status Code Type Values"). */
export const Sct = { Generic: 0, CommandSpecific: 1, Media: 2, Path: 3 } as const;

/** An NVMe status: SCT and SC (Base 2.0 §4.6.1.2), DNR when a retry cannot help. */
export interface NvmeStatus {
  sct: number;
  sc: number;
  dnr?: boolean;
}

const g = (sc: number, dnr = true): NvmeStatus => ({ sct: Sct.Generic, sc, dnr });
const cs = (sc: number): NvmeStatus => ({ sct: Sct.CommandSpecific, sc, dnr: true });

/** The statuses rblkd returns (Base 2.0 §4.6.1.2.1 generic, §4.6.1.2.2 command specific, §4.6.1.2.3 media; NVM Command Set 1.0 §2.1.2). */
export const Status = {
  Success: { sct: 0, sc: 0 } as NvmeStatus,
  InvalidOpcode: g(0x01),
  InvalidField: g(0x02),
  CommandIdConflict: g(0x03),
  DataTransferError: g(0x04),
  InternalError: g(0x06, false),
  AbortRequested: g(0x07, false),
  AbortSqDeletion: g(0x08, false),
  /** Base 2.0 §4.6.1.2.1: the other command of a fused pair failed (09h), or never came (0Ah). */
  AbortFailedFused: g(0x09),
  AbortMissingFused: g(0x0a),
  InvalidNamespace: g(0x0b),
  CommandSequenceError: g(0x0c),
  SglDataLengthInvalid: g(0x0f),
  SglTypeInvalid: g(0x11),
  SglOffsetInvalid: g(0x16),
  NamespaceNotReady: g(0x82, false),
  NamespaceWriteProtected: g(0x20),
  /** NVM Command Set 1.0 §2.1.2.1 / Base 2.0 §8.19: a reservation held by another host. */
  ReservationConflict: g(0x83),
  /** Path related (SCT 3h, Base 2.0 §4.6.1.2.4): this controller's path cannot reach the namespace now. */
  AsymmetricAccessInaccessible: { sct: 3, sc: 0x02, dnr: false } as NvmeStatus,
  TransientTransportError: g(0x22, false),
  LbaOutOfRange: g(0x80),
  CapacityExceeded: g(0x81),
  InvalidQueueIdentifier: cs(0x01),
  InvalidQueueSize: cs(0x02),
  AsyncEventLimitExceeded: cs(0x05),
  InvalidLogPage: cs(0x09),
  FeatureNotSaveable: cs(0x0d),
  ConnectIncompatibleFormat: cs(0x80),
  ConnectControllerBusy: cs(0x81),
  ConnectInvalidParameters: cs(0x82),
  ConnectInvalidHost: cs(0x84),
  /** Fabrics (TP 8006): a command other than Authentication Send/Receive on a queue that has not authenticated. */
  AuthenticationRequired: cs(0x91),
  WriteFault: { sct: Sct.Media, sc: 0x80, dnr: false } as NvmeStatus,
  UnrecoveredReadError: { sct: Sct.Media, sc: 0x81, dnr: false } as NvmeStatus,
  CompareFailure: { sct: Sct.Media, sc: 0x85, dnr: true } as NvmeStatus,
  AccessDenied: { sct: Sct.Media, sc: 0x86, dnr: true } as NvmeStatus,
} as const;

/** The 16-bit status field, CQE bytes 14-15 (Base 2.0 §4.6.1): P bit 0 (0 on fabrics, NVMe-oF 1.1 §2.2), SC bits 8:1, SCT 11:9, DNR bit 15. */
export function statusField(s: NvmeStatus): number {
  return ((s.sc & 0xff) << 1) | ((s.sct & 7) << 9) | (s.dnr ? 0x8000 : 0);
}

/** A CQE (Base 2.0 §4.6): DW0 bytes 0-3, DW1 4-7, SQHD 8-9, SQID 10-11, CID 12-13, status 14-15. */
export function buildCqe(o: CqeFields): Buffer {
  const b = Buffer.alloc(CQE_LENGTH);
  writeCqe(b, 0, o);
  return b;
}

export interface CqeFields {
  cid: number;
  sqid: number;
  sqhd: number;
  status: NvmeStatus;
  dw0?: number;
  dw1?: number;
}

/** Writes all 16 bytes of a CQE at `at` (a CapsuleResp's bytes 8-23 on a target, without a CQE of its own first). */
export function writeCqe(b: Buffer, at: number, o: CqeFields): void {
  b.writeUInt32LE((o.dw0 ?? 0) >>> 0, at);
  b.writeUInt32LE((o.dw1 ?? 0) >>> 0, at + 4);
  b.writeUInt16LE(o.sqhd & 0xffff, at + 8);
  b.writeUInt16LE(o.sqid, at + 10);
  b.writeUInt16LE(o.cid, at + 12);
  b.writeUInt16LE(statusField(o.status), at + 14);
}

/** A fixed-width ASCII field, space padded (Base 2.0 §1.5: ASCII strings in data structures). */
export function asciiField(b: Buffer, at: number, width: number, s: string): void {
  b.fill(0x20, at, at + width);
  b.write(s.slice(0, width), at, 'ascii');
}

/** An NQN field: UTF-8, NUL terminated, 256 bytes (Base 2.0 §4.5 NVMe Qualified Names). */
export function nqnField(b: Buffer, at: number, nqn: string): void {
  b.fill(0, at, at + 256);
  b.write(nqn, at, 255, 'utf8');
}

export function readNqn(b: Buffer, at: number): string {
  const field = b.subarray(at, at + 256);
  const end = field.indexOf(0);
  return field.subarray(0, end < 0 ? 256 : end).toString('utf8');
}

// ---- host side: Fabrics command SQEs and the CQE decoded ----

/** A Fabrics command SQE (NVMe-oF 1.1 §2.1.2): opcode 7Fh, FCTYPE byte 4 (no NSID on fabrics commands). */
function fabricsSqe(cid: number, fctype: number): Buffer {
  const b = buildSqe({ opcode: AdminOpcode.Fabrics, cid });
  b[4] = fctype;
  return b;
}

/**
 * Connect (NVMe-oF 1.1 §3.3, Figure "Connect Command – Submission Queue
 * Entry"): RECFMT 40-41 (0), QID 42-43, SQSIZE 44-45 (0's based), CATTR 46,
 * KATO 48-51 (ms); SGL1 an in-capsule Data Block of the 1024-byte Connect data.
 */
export function connectSqe(o: { cid: number; qid: number; sqsize: number; kato: number; cattr?: number }): Buffer {
  const b = fabricsSqe(o.cid, FabricsType.Connect);
  b.writeBigUInt64LE(0n, 24);
  b.writeUInt32LE(CONNECT_DATA_LENGTH, 32);
  b[39] = SglId.InCapsule;
  b.writeUInt16LE(0, 40);
  b.writeUInt16LE(o.qid, 42);
  b.writeUInt16LE(o.sqsize, 44);
  b[46] = o.cattr ?? 0;
  b.writeUInt32LE(o.kato >>> 0, 48);
  return b;
}

/** Connect data (NVMe-oF 1.1 §3.3, Figure "Connect Command – Data"): HOSTID 0-15, CNTLID 16-17, SUBNQN 256, HOSTNQN 512. */
export function connectData(o: { hostid: Buffer; cntlid: number; subnqn: string; hostnqn: string }): Buffer {
  const d = Buffer.alloc(CONNECT_DATA_LENGTH);
  o.hostid.copy(d, 0, 0, 16);
  d.writeUInt16LE(o.cntlid, 16);
  nqnField(d, 256, o.subnqn);
  nqnField(d, 512, o.hostnqn);
  return d;
}

/**
 * The data of Reservation Register (CRKEY, NRKEY) and Acquire (CRKEY, PRKEY): two
 * little-endian 64-bit keys (NVM Command Set 1.0 §3.2.5, §3.2.6). Release and
 * Clear take the first 8 bytes (CRKEY, §3.2.8).
 */
export function reservationKeys(a: bigint, b = 0n): Buffer {
  const d = Buffer.alloc(16);
  d.writeBigUInt64LE(a, 0);
  d.writeBigUInt64LE(b, 8);
  return d;
}

/** Property Get (NVMe-oF 1.1 §3.4): ATTRIB byte 40 bits 2:0 (0: 4 bytes, 1: 8 bytes), OFST bytes 44-47. */
export function propertyGetSqe(cid: number, offset: number, size8: boolean): Buffer {
  const b = fabricsSqe(cid, FabricsType.PropertyGet);
  b[40] = size8 ? 1 : 0;
  b.writeUInt32LE(offset, 44);
  return b;
}

/** Property Set (NVMe-oF 1.1 §3.5): ATTRIB byte 40, OFST bytes 44-47, VALUE bytes 48-55. */
export function propertySetSqe(cid: number, offset: number, size8: boolean, value: bigint): Buffer {
  const b = fabricsSqe(cid, FabricsType.PropertySet);
  b[40] = size8 ? 1 : 0;
  b.writeUInt32LE(offset, 44);
  b.writeBigUInt64LE(value, 48);
  return b;
}

/** A CQE as a host reads it (Base 2.0 §4.6): DW0, DW1, SQHD, SQID, CID, and the status field split (§4.6.1). */
export interface Cqe {
  dw0: number;
  dw1: number;
  sqhd: number;
  sqid: number;
  cid: number;
  status: NvmeStatus;
}

export function parseCqe(b: Buffer, at = 0): Cqe {
  const s = b.readUInt16LE(at + 14);
  return {
    dw0: b.readUInt32LE(at),
    dw1: b.readUInt32LE(at + 4),
    sqhd: b.readUInt16LE(at + 8),
    sqid: b.readUInt16LE(at + 10),
    cid: b.readUInt16LE(at + 12),
    status: { sc: (s >> 1) & 0xff, sct: (s >> 9) & 7, dnr: (s & 0x8000) !== 0 },
  };
}

/** Whether a status is Successful Completion (SCT 0h, SC 00h). */
export function isSuccess(s: NvmeStatus): boolean {
  return s.sct === 0 && s.sc === 0;
}
