// Admin data structures the target returns (NVMe Base 2.0 §5.17.2 Identify,
// §5.16.1 log pages; NVM Command Set 1.0 §4.1.5 Identify Namespace;
// NVMe over Fabrics 1.1 §5.4 Discovery Log Page). Offsets are the spec's
// byte offsets; everything is little-endian.
import { asciiField, nqnField } from './command.js';

export const IDENTIFY_LENGTH = 4096;

/** What Identify Controller reports (CNS 01h, Base 2.0 Figure "Identify Controller Data Structure"). */
export interface ControllerIdentity {
  serial: string;
  model: string;
  firmware: string;
  cntlid: number;
  subnqn: string;
  /** 1 I/O controller, 2 discovery controller (CNTRLTYPE). */
  type: 1 | 2;
  /** MDTS as a power of two of the 4 KiB minimum page (CAP.MPSMIN 0). */
  mdts: number;
  maxcmd: number;
  /** Highest NSID (NN). */
  nn: number;
  /** How many namespaces there can be at most (MNAN); hosts size the ANA log by it. */
  mnan: number;
  /** In-capsule data the controller takes, bytes (IOCCSZ = (64 + this) / 16). */
  inCapsuleData: number;
  /** Keep Alive granularity in 100 ms units (KAS). */
  kas: number;
  /** The highest ANA group ID (ANAGRPMAX, NANAGRPID); 0: no ANA reporting. */
  anaGroups: number;
}

export const VERSION_2_0 = 0x00020000;
/** ONCS bits (Base 2.0 offset 520): 0 Compare, 2 Dataset Management, 3 Write Zeroes, 5 Reservations, 7 Verify. */
export const ONCS = (1 << 0) | (1 << 2) | (1 << 3) | (1 << 5) | (1 << 7);

export function identifyController(c: ControllerIdentity): Buffer {
  const b = Buffer.alloc(IDENTIFY_LENGTH);
  // VID, SSVID (0-3): no PCI vendor on fabrics; 0.
  asciiField(b, 4, 20, c.serial); // SN
  asciiField(b, 24, 40, c.model); // MN
  asciiField(b, 64, 8, c.firmware); // FR
  b[72] = 0; // RAB: 2^0 commands
  // CMIC bit 1: the subsystem may have two or more controllers (dynamic model); bit 3: ANA reporting.
  b[76] = (1 << 1) | (c.anaGroups > 0 ? 1 << 3 : 0);
  b[77] = c.mdts; // MDTS
  b.writeUInt16LE(c.cntlid, 78); // CNTLID
  b.writeUInt32LE(VERSION_2_0, 80); // VER
  // OAES bit 8: Namespace Attribute Notices; bit 11: ANA Change Notices.
  if (c.type === 1) b.writeUInt32LE((1 << 8) | (c.anaGroups > 0 ? 1 << 11 : 0), 92);
  b.writeUInt32LE(1 << 0, 96); // CTRATT bit 0: 128-bit Host Identifier
  b[111] = c.type; // CNTRLTYPE
  // OACS (256-257) 0: no security, format, firmware, namespace management commands.
  b[258] = 3; // ACL: 4 Abort commands (0's based)
  b[259] = 3; // AERL: 4 outstanding AERs (0's based)
  b[260] = 1 << 1 | 1 << 0; // FRMW: 1 slot (bits 3:1 = 1), slot 1 read only
  b[261] = 1 << 2; // LPA bit 2: extended Get Log Page (NUMDU, LPOL/LPOU)
  b[262] = 0; // ELPE: 1 error log entry (0's based)
  b.writeUInt16LE(c.kas, 320); // KAS
  if (c.anaGroups > 0) {
    b[343] = 10; // ANATT: ANA transition time, seconds
    // ANACAP: bits 0-2 optimized, non-optimized and inaccessible are reported; bit 6 ANAGRPID does not change while attached.
    b[344] = 0x47;
    b.writeUInt32LE(c.anaGroups, 348); // ANAGRPMAX
    b.writeUInt32LE(c.anaGroups, 352); // NANAGRPID
  }
  if (c.type === 1) {
    b[512] = 0x66; // SQES: 64-byte entries required and maximum (2^6)
    b[513] = 0x44; // CQES: 16-byte entries (2^4)
  }
  b.writeUInt16LE(c.maxcmd, 514); // MAXCMD
  b.writeUInt32LE(c.type === 1 ? c.nn : 0, 516); // NN
  if (c.type === 1) {
    b.writeUInt16LE(ONCS, 520); // ONCS
    b.writeUInt16LE(1, 522); // FUSES bit 0: fused Compare and Write
    b[525] = 1; // VWC bit 0: a volatile write cache is present (Flush matters)
    b.writeUInt32LE(c.mnan, 540); // MNAN
    // SGLS (536): bits 1:0 01b SGLs supported; bit 20: the address of an in-capsule Data Block may be an offset.
    b.writeUInt32LE(1 | (1 << 20), 536);
  } else {
    b.writeUInt32LE(1 | (1 << 20), 536);
  }
  nqnField(b, 768, c.subnqn); // SUBNQN
  // NVMe over Fabrics attributes (1792-2047, NVMe-oF 1.1 §4.1 / Base 2.0 Identify Controller).
  b.writeUInt32LE((64 + c.inCapsuleData) / 16, 1792); // IOCCSZ, 16-byte units
  b.writeUInt32LE(1, 1796); // IORCSZ: 16 bytes, a CQE only
  b.writeUInt16LE(0, 1800); // ICDOFF: in-capsule data right after the SQE
  b[1802] = 0; // FCATT bit 0 = 0: dynamic controller model
  b[1803] = 1; // MSDBD: one SGL data block descriptor per command
  return b;
}

/** What Identify Namespace reports for one namespace. */
export interface NamespaceIdentity {
  blocks: number;
  blockSize: number;
  thin: boolean;
  readOnly: boolean;
  nguid: Buffer;
  /** Blocks per unit of deallocation granularity. */
  deallocGranularity: number;
  /** ANAGRPID; 0 without ANA reporting. */
  anaGroup: number;
  /** RESCAP (byte 31). */
  rescap: number;
}

/** Identify Namespace, CNS 00h (NVM Command Set 1.0 §4.1.5.1, Figure "Identify Namespace Data Structure"). */
export function identifyNamespace(n: NamespaceIdentity): Buffer {
  const b = Buffer.alloc(IDENTIFY_LENGTH);
  b.writeBigUInt64LE(BigInt(n.blocks), 0); // NSZE
  b.writeBigUInt64LE(BigInt(n.blocks), 8); // NCAP
  b.writeBigUInt64LE(BigInt(n.blocks), 16); // NUSE (no per-block accounting: all)
  b[24] = n.thin ? 1 : 0; // NSFEAT bit 0: thin provisioning
  b[25] = 0; // NLBAF: one LBA format (0's based)
  b[26] = 0; // FLBAS: format 0, no metadata
  b[30] = 1; // NMIC bit 0: may be attached to two or more controllers
  b[31] = n.rescap; // RESCAP: the reservation types supported
  // DLFEAT (33): bits 2:0 001b deallocated blocks read as zeroes; bit 3 Write Zeroes may deallocate.
  b[33] = n.thin ? 0x09 : 0x01;
  b.writeUInt32LE(n.anaGroup, 92); // ANAGRPID
  b[99] = n.readOnly ? 1 : 0; // NSATTR bit 0: write protected
  n.nguid.copy(b, 104, 0, 16); // NGUID
  b.writeUInt16LE(Math.min(0xffff, Math.max(0, n.deallocGranularity - 1)), 68); // NPDG (0's based)
  // LBAF0 (128): MS 15:0 = 0, LBADS 23:16 = log2(block size), RP 25:24 = 0.
  b.writeUInt32LE(Math.log2(n.blockSize) << 16, 128);
  return b;
}

/** Namespace Identification Descriptor list, CNS 03h (Base 2.0 §5.17.2.3): NIDT, NIDL, 2 reserved, NID. */
export function namespaceDescriptors(o: { nguid: Buffer; uuid: Buffer; csi: number }): Buffer {
  const b = Buffer.alloc(IDENTIFY_LENGTH);
  let at = 0;
  const put = (nidt: number, nid: Buffer) => {
    b[at] = nidt;
    b[at + 1] = nid.length;
    nid.copy(b, at + 4);
    at += 4 + nid.length;
  };
  put(2, o.nguid.subarray(0, 16)); // NIDT 2h NGUID
  put(3, o.uuid.subarray(0, 16)); // NIDT 3h UUID
  put(4, Buffer.from([o.csi])); // NIDT 4h Command Set Identifier
  return b;
}

/** Active Namespace ID list, CNS 02h (Base 2.0 §5.17.2.2): ascending NSIDs above `after`, up to 1024. */
export function activeNamespaceList(nsids: readonly number[], after: number): Buffer {
  const b = Buffer.alloc(IDENTIFY_LENGTH);
  let at = 0;
  for (const n of [...nsids].sort((x, y) => x - y)) {
    if (n <= after) continue;
    if (at >= IDENTIFY_LENGTH) break;
    b.writeUInt32LE(n, at);
    at += 4;
  }
  return b;
}

/** SMART / Health Information, log 02h (Base 2.0 §5.16.1.3): 512 bytes. */
export function smartLog(o: { unitsRead: bigint; unitsWritten: bigint; reads: bigint; writes: bigint; critical: number }): Buffer {
  const b = Buffer.alloc(512);
  b[0] = o.critical; // Critical Warning (bit 3: media read only)
  b.writeUInt16LE(293, 1); // Composite Temperature, Kelvin (no sensor: 20 °C)
  b[3] = 100; // Available Spare %
  b[4] = 10; // Available Spare Threshold %
  b[5] = 0; // Percentage Used
  // Data Units Read/Written (32, 48): thousands of 512-byte units; Host Read/Write Commands (64, 80). 128-bit fields, low half here.
  b.writeBigUInt64LE(o.unitsRead, 32);
  b.writeBigUInt64LE(o.unitsWritten, 48);
  b.writeBigUInt64LE(o.reads, 64);
  b.writeBigUInt64LE(o.writes, 80);
  return b;
}

/** Changed Namespace List, log 04h (Base 2.0 §5.16.1.5): up to 1024 NSIDs; FFFFFFFFh first when more changed. */
export function changedNamespaceList(nsids: readonly number[]): Buffer {
  const b = Buffer.alloc(4096);
  if (nsids.length > 1024) b.writeUInt32LE(0xffffffff, 0);
  else nsids.forEach((n, i) => b.writeUInt32LE(n, i * 4));
  return b;
}

/** Reservation Notification Log Page Type, RNLPT (Base 2.0 §5.16.1, "Reservation Notification (Log Page Identifier 80h)"). */
export const ReservationNotice = { Empty: 0x0, RegistrationPreempted: 0x1, ReservationReleased: 0x2, ReservationPreempted: 0x3 } as const;

/**
 * Reservation Notification log, 80h (Base 2.0 §5.16.1, "Reservation
 * Notification (Log Page Identifier 80h)"), 64 bytes: Log Page Count 0-7,
 * RNLPT byte 8, Number of Available Log Pages (NALP) byte 9, NSID 12-15. All
 * zero (LPC 0, type Empty) when no page is waiting.
 */
export function reservationNotificationLog(o: { lpc: bigint; type: number; available: number; nsid: number }): Buffer {
  const b = Buffer.alloc(64);
  b.writeBigUInt64LE(o.lpc, 0);
  b[8] = o.type;
  b[9] = Math.min(0xff, o.available);
  b.writeUInt32LE(o.nsid >>> 0, 12);
  return b;
}

/** ANA states (Base 2.0 §8.20.3): Optimized, Non-Optimized, Inaccessible, Persistent Loss, Change. */
export const AnaState = { Optimized: 0x01, NonOptimized: 0x02, Inaccessible: 0x03, PersistentLoss: 0x04, Change: 0x0f } as const;

/**
 * Asymmetric Namespace Access log, 0Ch (Base 2.0 §5.16.1.13): header CHGCNT 0-7,
 * NGRPS 8-9; per group ANAGRPID 0-3, NNSID 4-7, CHGCNT 8-15, ANAS byte 16 bits 3:0,
 * then the NSIDs (none when RGO, LSP bit 0, asks for groups only).
 */
export function anaLog(chgcnt: bigint, groups: readonly { id: number; state: number; nsids: readonly number[] }[], groupsOnly: boolean): Buffer {
  const parts = [Buffer.alloc(16)];
  parts[0].writeBigUInt64LE(chgcnt, 0);
  parts[0].writeUInt16LE(groups.length, 8);
  for (const g of groups) {
    const nsids = groupsOnly ? [] : [...g.nsids].sort((a, b) => a - b);
    const d = Buffer.alloc(32 + 4 * nsids.length);
    d.writeUInt32LE(g.id, 0);
    d.writeUInt32LE(nsids.length, 4);
    d.writeBigUInt64LE(chgcnt, 8);
    d[16] = g.state & 0x0f;
    nsids.forEach((n, i) => d.writeUInt32LE(n, 32 + 4 * i));
    parts.push(d);
  }
  return Buffer.concat(parts);
}

/** One Discovery Log Page entry (NVMe-oF 1.1 §5.4, Figure "Discovery Log Page Entry"), for TCP. */
export interface DiscoveryEntry {
  /** ADRFAM: 1 IPv4, 2 IPv6. */
  adrfam: 1 | 2;
  /** SUBTYPE: 1 a discovery subsystem, 2 an NVM subsystem. */
  subtype: 1 | 2;
  portid: number;
  trsvcid: string;
  subnqn: string;
  traddr: string;
}

/** Discovery Log Page, log 70h: 1024-byte header (GENCTR 0-7, NUMREC 8-15, RECFMT 16-17) then 1024-byte entries. */
export function discoveryLog(genctr: bigint, entries: readonly DiscoveryEntry[]): Buffer {
  const b = Buffer.alloc(1024 * (1 + entries.length));
  b.writeBigUInt64LE(genctr, 0);
  b.writeBigUInt64LE(BigInt(entries.length), 8);
  b.writeUInt16LE(0, 16);
  entries.forEach((e, i) => {
    const at = 1024 * (i + 1);
    b[at] = 3; // TRTYPE 3h: TCP
    b[at + 1] = e.adrfam; // ADRFAM
    b[at + 2] = e.subtype; // SUBTYPE
    b[at + 3] = 0x04 | 0x02; // TREQ: bit 2 SQ flow control disable supported; bits 1:0 10b secure channel not required
    b.writeUInt16LE(e.portid, at + 4); // PORTID
    b.writeUInt16LE(0xffff, at + 6); // CNTLID FFFFh: dynamic controller model
    b.writeUInt16LE(32, at + 8); // ASQSZ: admin queue size
    // TRSVCID and TRADDR: ASCII, NUL padded as Linux hosts read them (docs/nvme.md "Discovery").
    b.write(e.trsvcid.slice(0, 31), at + 32, 'ascii'); // TRSVCID
    nqnField(b, at + 256, e.subnqn); // SUBNQN
    b.write(e.traddr.slice(0, 255), at + 512, 'ascii'); // TRADDR
    b[at + 768] = 0; // TSAS for TCP: SECTYPE 0, no security
  });
  return b;
}

// ---- host side: the same structures decoded ----

function ascii(b: Buffer, at: number, width: number): string {
  return b.toString('latin1', at, at + width).replace(/[\0 ]+$/, '');
}

function nulString(b: Buffer, at: number, width: number): string {
  const f = b.subarray(at, at + width);
  const end = f.indexOf(0);
  return f.subarray(0, end < 0 ? width : end).toString('utf8').trim();
}

/** What a host needs of Identify Controller (CNS 01h, Base 2.0 Figure "Identify Controller Data Structure"). */
export interface ControllerInfo {
  serial: string;
  model: string;
  firmware: string;
  /** CMIC (76) bit 3: ANA reporting. */
  anaReporting: boolean;
  /** MDTS (77): 0 means no limit. */
  mdts: number;
  cntlid: number;
  version: number;
  /** CNTRLTYPE (111): 1 I/O, 2 discovery, 3 administrative. */
  type: number;
  /** KAS (320), 100 ms units. */
  kas: number;
  maxcmd: number;
  nn: number;
  /** ONCS (520-521). */
  oncs: number;
  /** ANAGRPMAX (348). */
  anaGroupMax: number;
  subnqn: string;
  /** IOCCSZ (1792), 16-byte units, SQE included (NVMe-oF 1.1 §4.1). */
  ioccsz: number;
}

export function parseIdentifyController(b: Buffer): ControllerInfo {
  return {
    serial: ascii(b, 4, 20),
    model: ascii(b, 24, 40),
    firmware: ascii(b, 64, 8),
    anaReporting: (b[76] & (1 << 3)) !== 0,
    mdts: b[77],
    cntlid: b.readUInt16LE(78),
    version: b.readUInt32LE(80),
    type: b[111],
    kas: b.readUInt16LE(320),
    anaGroupMax: b.readUInt32LE(348),
    maxcmd: b.readUInt16LE(514),
    nn: b.readUInt32LE(516),
    oncs: b.readUInt16LE(520),
    subnqn: nulString(b, 768, 256),
    ioccsz: b.readUInt32LE(1792),
  };
}

/** What a host needs of Identify Namespace (CNS 00h, NVM Command Set 1.0 §4.1.5.1). */
export interface NamespaceInfo {
  /** NSZE (0-7), blocks; 0 for an inactive NSID. */
  blocks: number;
  /** From LBAF[FLBAS bits 3:0] (128 + 4n) LBADS bits 23:16. */
  blockSize: number;
  /** NSFEAT (24) bit 0. */
  thin: boolean;
  /** DLFEAT (33) bits 2:0 = 001b: deallocated blocks read as zeroes. */
  deallocatedReadsZeroes: boolean;
  /** ANAGRPID (92). */
  anaGroup: number;
  /** NSATTR (99) bit 0. */
  writeProtected: boolean;
  /** NGUID (104-119), hex. */
  nguid: string;
}

export function parseIdentifyNamespace(b: Buffer): NamespaceInfo {
  const lbaf = b[26] & 0x0f;
  const lbads = (b.readUInt32LE(128 + 4 * lbaf) >>> 16) & 0xff;
  return {
    blocks: Number(b.readBigUInt64LE(0)),
    blockSize: lbads === 0 ? 0 : 2 ** lbads,
    thin: (b[24] & 1) !== 0,
    deallocatedReadsZeroes: (b[33] & 7) === 1,
    anaGroup: b.readUInt32LE(92),
    writeProtected: (b[99] & 1) !== 0,
    nguid: b.subarray(104, 120).toString('hex'),
  };
}

/** Active Namespace ID list (CNS 02h, Base 2.0 §5.17.2.2): NSIDs until the first 0. */
export function parseActiveNamespaceList(b: Buffer): number[] {
  const out: number[] = [];
  for (let at = 0; at + 4 <= b.length; at += 4) {
    const n = b.readUInt32LE(at);
    if (n === 0) break;
    out.push(n);
  }
  return out;
}

/** One ANA group descriptor of log 0Ch (Base 2.0 §5.16.1.13). */
export interface AnaGroup {
  id: number;
  state: number;
  nsids: number[];
}

/** The ANA log decoded; a descriptor that runs past the buffer ends the list (a short read). */
export function parseAnaLog(b: Buffer): { chgcnt: bigint; groups: AnaGroup[] } {
  if (b.length < 16) return { chgcnt: 0n, groups: [] };
  const chgcnt = b.readBigUInt64LE(0);
  const n = b.readUInt16LE(8);
  const groups: AnaGroup[] = [];
  let at = 16;
  for (let i = 0; i < n && at + 32 <= b.length; i++) {
    const nnsid = b.readUInt32LE(at + 4);
    if (at + 32 + 4 * nnsid > b.length) break;
    const nsids = Array.from({ length: nnsid }, (_, k) => b.readUInt32LE(at + 32 + 4 * k));
    groups.push({ id: b.readUInt32LE(at), state: b[at + 16] & 0x0f, nsids });
    at += 32 + 4 * nnsid;
  }
  return { chgcnt, groups };
}

/** One Discovery Log Page entry as a host reads it (NVMe-oF 1.1 §5.4), any transport. */
export interface DiscoveryRecord {
  trtype: number;
  adrfam: number;
  subtype: number;
  treq: number;
  portid: number;
  cntlid: number;
  asqsz: number;
  trsvcid: string;
  subnqn: string;
  traddr: string;
}

/** The Discovery Log Page decoded: GENCTR, NUMREC, and the entries the buffer holds. */
export function parseDiscoveryLog(b: Buffer): { genctr: bigint; numrec: number; entries: DiscoveryRecord[] } {
  const genctr = b.readBigUInt64LE(0);
  const numrec = Number(b.readBigUInt64LE(8));
  const entries: DiscoveryRecord[] = [];
  for (let i = 0; i < numrec && 1024 * (i + 2) <= b.length; i++) {
    const at = 1024 * (i + 1);
    entries.push({
      trtype: b[at],
      adrfam: b[at + 1],
      subtype: b[at + 2],
      treq: b[at + 3],
      portid: b.readUInt16LE(at + 4),
      cntlid: b.readUInt16LE(at + 6),
      asqsz: b.readUInt16LE(at + 8),
      trsvcid: nulString(b, at + 32, 32),
      subnqn: nulString(b, at + 256, 256),
      traddr: nulString(b, at + 512, 256),
    });
  }
  return { genctr, numrec, entries };
}

/** Namespace Identification Descriptor list (CNS 03h, Base 2.0 §5.17.2.3) decoded: NIDT 1h EUI-64, 2h NGUID, 3h UUID, 4h CSI; a zero NIDT ends it. */
export function parseNamespaceDescriptors(b: Buffer): { eui64?: string; nguid?: string; uuid?: string; csi?: number } {
  const out: { eui64?: string; nguid?: string; uuid?: string; csi?: number } = {};
  for (let at = 0; at + 4 <= b.length; ) {
    const nidt = b[at];
    const nidl = b[at + 1];
    if (nidt === 0 || at + 4 + nidl > b.length) break;
    const nid = b.subarray(at + 4, at + 4 + nidl);
    if (nidt === 1 && nidl === 8) out.eui64 = nid.toString('hex');
    else if (nidt === 2 && nidl === 16) out.nguid = nid.toString('hex');
    else if (nidt === 3 && nidl === 16) {
      const h = nid.toString('hex');
      out.uuid = `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
    } else if (nidt === 4 && nidl === 1) out.csi = nid[0];
    at += 4 + nidl;
  }
  return out;
}
