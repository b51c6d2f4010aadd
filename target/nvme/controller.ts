// One NVMe controller of the dynamic controller model (NVMe-oF 1.1 §3.3,
// docs/nvme.md "Controllers"): made by an admin queue Connect, joined by I/O
// queue Connects with its CNTLID, gone when its admin queue ends or its
// Keep Alive timer expires. It holds the properties (Base 2.0 §3.1.4), the
// features, the held Asynchronous Event Requests and the namespaces its host
// may see, and answers the admin command set (Base 2.0 §5).
import { AdminOpcode, cdw, DISCOVERY_NQN, Property, Status, type NvmeStatus } from '../../protocol/nvme/command.js';
import {
  activeNamespaceList,
  anaLog,
  AnaState,
  changedNamespaceList,
  discoveryLog,
  identifyController,
  identifyNamespace,
  namespaceDescriptors,
  ReservationNotice,
  reservationNotificationLog,
  smartLog,
  VERSION_2_0,
  type DiscoveryEntry,
} from '../../protocol/nvme/identify.js';
import type { SenseCode } from '../../protocol/scsi/sense-codes.js';
import type { ConnectionEnvironment, TargetLogger } from '../connection/environment.js';
import type { Completion, Namespace, PreparedIo } from './io.js';
import { RESCAP } from './reservations.js';
import type { Subsystem } from './subsystem.js';

/** What a controller needs of one of its queues' connections. */
export interface QueueConnection {
  readonly qid: number;
  /** Its host's I_T nexus key (host NQN and listener) once connected: whose reservation notices it hears. */
  readonly nexusKey: string | null;
  /** Ends the connection (the controller went away). */
  close(why: string): void;
}

/** The highest NSID (Identify Controller NN): LUNs 0..16382 become NSIDs 1..16383. */
export const MAX_NSID = 16383;
/** I/O queues a controller grants at most (Number of Queues, Base 2.0 §5.27.1.5). */
export const MAX_IO_QUEUES = 64;
/** Admin queue entries a Connect must ask for at least (SQSIZE 0's based ≥ 31, NVMe-oF 1.1 §3.3 / Base 2.0 §3.3.1). */
export const MIN_ADMIN_QUEUE = 32;
/** Keep Alive granularity reported (KAS), 100 ms units. */
const KAS = 10;
/** The longest delay setTimeout keeps (2^31 - 1 ms); Node runs a longer one after 1 ms. */
const MAX_TIMER_MS = 0x7fffffff;
/** Reservation notification log pages a controller keeps for its host; past this the oldest go (LPC still counts them). */
export const MAX_RESERVATION_NOTICES = 64;
/** Reservation Notification Mask (feature 82h) bits: REGPRE 1, RESREL 2, RESPRE 3 (Base 2.0 §5.27.1, "Reservation Notification Mask"). */
const RESV_MASK_BITS = (1 << 1) | (1 << 2) | (1 << 3);
/** AER completion DW0: type 6h I/O Command Set specific, information 00h Reservation Log Page Available, log page 80h (Base 2.0 §5.2). */
const AEN_RESERVATION_LOG = 0x800006;

/** The SPC-5 unit attention a reservation change raises (5.14.11) → the NVMe notice of the same occasion (Base 2.0 §8.19). */
function noticeType(code: SenseCode): number {
  if (code.asc !== 0x2a) return ReservationNotice.Empty;
  if (code.ascq === 0x05) return ReservationNotice.RegistrationPreempted;
  if (code.ascq === 0x04) return ReservationNotice.ReservationReleased;
  if (code.ascq === 0x03) return ReservationNotice.ReservationPreempted;
  return ReservationNotice.Empty;
}

export interface ControllerOptions {
  readonly cntlid: number;
  readonly subsystem: Subsystem;
  readonly env: ConnectionEnvironment;
  readonly hostnqn: string;
  readonly hostid: Buffer;
  readonly discovery: boolean;
  /** Connect's KATO, ms; 0 disables the timer. */
  readonly kato: number;
  /** Queue entries at most (CAP.MQES + 1). */
  readonly maxQueueSize: number;
  readonly log: TargetLogger;
}

type Held = (c: Completion) => void;

export class Controller {
  readonly cntlid: number;
  readonly hostnqn: string;
  readonly hostid: Buffer;
  readonly discovery: boolean;
  readonly queues = new Map<number, QueueConnection>();

  /** The highest I/O queue id a Connect may open: what Number of Queues granted (submission and completion queues pair). */
  get ioQueueLimit(): number {
    return Math.min(this.#grantedQueues & 0xffff, this.#grantedQueues >>> 16) + 1;
  }
  namespaces = new Map<number, Namespace>();
  #cc = 0;
  #csts = 0;
  #kato: number;
  #katoTimer: NodeJS.Timeout | null = null;
  /** Number of Queues granted (Set Features 07h's reply: NSQR | NCQR << 16, 0's based); all of them until a Set. */
  #grantedQueues = (MAX_IO_QUEUES - 1) | ((MAX_IO_QUEUES - 1) << 16);
  /** Async Event Configuration (feature 0Bh); bit 8 Namespace Attribute Notices. */
  #aec = 0;
  readonly #aers: Held[] = [];
  /** A namespace was over a space threshold at the last look (#checkSpace). */
  #spaceLow = false;
  /** Events waiting for an AER (CQE DW0 values). */
  readonly #events: number[] = [];
  readonly #changed = new Set<number>();
  #ended = false;
  /** The ANA state last reported, and how often it changed (the ANA log's CHGCNT). */
  #anaState = 0;
  #anaChanges = 0n;
  /** Reservation notification log pages not yet read, oldest first, each with its Log Page Count. */
  readonly #notices: { lpc: bigint; type: number; nsid: number }[] = [];
  /** The Log Page Count of the last page made (Base 2.0: it wraps from FFFFFFFFFFFFFFFFh to 1). */
  #lpc = 0n;
  /** Reservation Notification Mask per NSID (feature 82h): bit n masks type n. */
  readonly #resvMask = new Map<number, number>();
  /** A Reservation Log Page Available event was sent and the log not read since: no other until it is (Base 2.0 §5.2). */
  #resvAenSent = false;
  /** The listeners this controller put on its namespaces' reservations, taken off when they change or it ends. */
  #unlisten: (() => void)[] = [];

  constructor(private readonly o: ControllerOptions) {
    this.cntlid = o.cntlid;
    this.hostnqn = o.hostnqn;
    this.hostid = o.hostid;
    this.discovery = o.discovery;
    this.#kato = o.kato;
    if (!o.discovery) this.namespaces = this.#lookup();
    this.#anaState = this.anaState();
    this.#listenReservations();
    o.subsystem.controllers.set(this.cntlid, this);
    this.keepAlive();
  }

  get ready(): boolean {
    return (this.#csts & 1) !== 0;
  }

  get ended(): boolean {
    return this.#ended;
  }

  #lookup(): Map<number, Namespace> {
    const m = new Map<number, Namespace>();
    for (const [lun, { lu, access, nsid }] of this.o.env.lunsFor(this.hostnqn)) {
      const id = nsid ?? lun + 1;
      if (id <= MAX_NSID) m.set(id, { nsid: id, lun, lu, access });
    }
    return m;
  }

  /** After a reload: the namespaces again; an Asynchronous Event (Namespace Attribute Changed) if any changed. */
  refreshNamespaces(): void {
    if (this.discovery || this.#ended) return;
    const next = this.#lookup();
    for (const n of new Set([...next.keys(), ...this.namespaces.keys()])) {
      const a = this.namespaces.get(n);
      const b = next.get(n);
      if (a?.lu !== b?.lu || a?.access !== b?.access) this.#changed.add(n);
    }
    this.namespaces = next;
    this.#listenReservations();
    // Event type 2h Notice, information 00h Namespace Attribute Changed, log page 04h (Base 2.0 §5.2, Figure "AER Completion").
    if (this.#changed.size > 0 && (this.#aec & (1 << 8)) !== 0) this.#raise(0x040002);
    this.checkAna();
  }

  /** Hears the reservation notices of each namespace's volume (target/scsi/reservations/reservations.ts noticeListeners). */
  #listenReservations(): void {
    for (const f of this.#unlisten.splice(0)) f();
    for (const ns of this.namespaces.values()) {
      const listener = (key: string, code: SenseCode): void => this.#reservationNotice(ns.nsid, key, code);
      const set = ns.lu.reservations.noticeListeners;
      set.add(listener);
      this.#unlisten.push(() => set.delete(listener));
    }
  }

  /**
   * A reservation notice for `nexusKey` on namespace nsid: when it is this
   * controller's host (the nexus of one of its queues) and the type is not
   * masked (feature 82h), a Reservation Notification log page is made and,
   * unless one is already outstanding, the Reservation Log Page Available
   * event completes an AER (Base 2.0 §8.19 "Reservation Notifications", §5.2).
   */
  #reservationNotice(nsid: number, key: string, code: SenseCode): void {
    if (this.#ended || this.namespaces.get(nsid) === undefined) return;
    if (![...this.queues.values()].some((q) => q.nexusKey === key)) return;
    const type = noticeType(code);
    if (type === ReservationNotice.Empty || ((this.#resvMask.get(nsid) ?? 0) & (1 << type)) !== 0) return;
    this.#lpc = this.#lpc === 0xffffffffffffffffn ? 1n : this.#lpc + 1n;
    this.#notices.push({ lpc: this.#lpc, type, nsid });
    // Too many unread: the oldest is lost, which the host sees as a gap in LPC.
    if (this.#notices.length > MAX_RESERVATION_NOTICES) this.#notices.shift();
    if (!this.#resvAenSent) {
      this.#resvAenSent = true;
      this.#raise(AEN_RESERVATION_LOG);
    }
  }

  /** Log 80h: the oldest page, removed as it is read (LPOL 0), with how many more wait; all zero when none does. */
  #reservationLog(offset: number, rae: boolean): Buffer {
    const next = offset === 0 ? this.#notices.shift() : this.#notices[0];
    // Reading the log (RAE clear) lets the next notice raise an event again.
    if (!rae) this.#resvAenSent = false;
    if (next === undefined) return Buffer.alloc(64);
    return reservationNotificationLog({ lpc: next.lpc, type: next.type, available: this.#notices.length - (offset === 0 ? 0 : 1), nsid: next.nsid });
  }

  #raise(event: number): void {
    if (!this.#events.includes(event)) this.#events.push(event);
    this.#deliver();
  }

  /** This gateway's ANA group: its ALUA target port group (docs/nvme.md "ANA"), or 1 without one. */
  get anaGroup(): number {
    for (const ns of this.namespaces.values()) if (ns.lu.portGroups) return ns.lu.portGroups.local.group;
    return 1;
  }

  /** The ANA state (Base 2.0 §8.20.3) of this gateway's group, from its ALUA state. */
  anaState(): number {
    for (const ns of this.namespaces.values()) {
      if (ns.lu.backend.fenced === true) return AnaState.Inaccessible;
      const pg = ns.lu.portGroups;
      if (pg) return pg.local.state === 'active-optimized' ? AnaState.Optimized : pg.local.state === 'active-non-optimized' ? AnaState.NonOptimized : AnaState.Inaccessible;
    }
    return AnaState.Optimized;
  }

  /**
   * Whether the ANA state changed since last reported (a reload changed the port
   * group, or the store fenced this gateway): then CHGCNT moves and, when the host
   * enabled ANA change notices (AEC bit 11), an event of type Notice, information
   * 03h ANA Change, log page 0Ch completes an AER. Asked at each reload and each Keep Alive.
   */
  checkAna(): void {
    this.#checkSpace();
    if (this.discovery) return;
    const now = this.anaState();
    if (now === this.#anaState) return;
    this.#anaState = now;
    this.#anaChanges++;
    if ((this.#aec & (1 << 11)) !== 0) this.#raise(0x0c0302);
  }

  /**
   * A namespace's volume over a space threshold (docs/operations.md "Space thresholds") is the
   * SMART/Health critical warning "available spare below threshold" (bit 0, §5.16.1.3): the spare
   * a thin namespace has is its pool's free space. On the way up, with AEC bit 0 enabled, an
   * event of type SMART/Health Status, information 02h Spare Below Threshold, log page 02h (§5.2).
   * Asked wherever ANA is (reload, Keep Alive, Get Log Page).
   */
  #checkSpace(): void {
    if (this.discovery) return;
    const low = [...this.namespaces.values()].some((ns) => ns.lu.spaceLow);
    if (low && !this.#spaceLow && (this.#aec & 1) !== 0) this.#raise(0x020201);
    this.#spaceLow = low;
  }

  #deliver(): void {
    while (this.#aers.length > 0 && this.#events.length > 0) this.#aers.shift()!({ status: Status.Success, dw0: this.#events.shift()! });
  }

  /** Restarts the Keep Alive timer (Base 2.0 §3.9.5): the controller ends if nothing resets it within KATO. */
  keepAlive(): void {
    if (this.#katoTimer !== null) clearTimeout(this.#katoTimer);
    this.#katoTimer = null;
    if (this.#kato === 0 || this.#ended) return;
    this.#armKato(this.#kato);
  }

  /**
   * KATO is 32 bits of ms (up to about 49.7 days), and a timer's delay only 31: Node runs a longer one after
   * 1 ms. So a long KATO is waited in steps, and the controller never ends before it.
   */
  #armKato(left: number): void {
    const step = Math.min(left, MAX_TIMER_MS);
    this.#katoTimer = setTimeout(() => {
      if (left > step) this.#armKato(left - step);
      else this.end(`Keep Alive Timeout expired (KATO ${this.#kato} ms)`);
    }, step);
    this.#katoTimer.unref();
  }

  /** The controller goes away: every queue's connection ends (Base 2.0 §3.9.5; NVMe-oF 1.1 §3.5 association). */
  end(why: string): void {
    if (this.#ended) return;
    this.#ended = true;
    if (this.#katoTimer !== null) clearTimeout(this.#katoTimer);
    this.o.log.info(`NVMe controller ${this.cntlid} of ${this.hostnqn} ends: ${why}`);
    if (this.o.subsystem.controllers.get(this.cntlid) === this) this.o.subsystem.controllers.delete(this.cntlid);
    this.#aers.length = 0;
    for (const f of this.#unlisten.splice(0)) f();
    for (const q of [...this.queues.values()]) q.close(why);
  }

  /** CAP (Base 2.0 §3.1.4.1): MQES 15:0, CQR bit 16, TO 31:24 (500 ms units), CSS bit 37 NVM, MPSMIN/MPSMAX 0 (4 KiB). */
  get cap(): bigint {
    return BigInt(this.o.maxQueueSize - 1) | (1n << 16n) | (15n << 24n) | (1n << 37n);
  }

  propertyGet(offset: number, size8: boolean): Completion {
    let v: bigint;
    if (offset === Property.CAP && size8) v = this.cap;
    else if (offset === Property.VS && !size8) v = BigInt(VERSION_2_0);
    else if (offset === Property.CC && !size8) v = BigInt(this.#cc);
    else if (offset === Property.CSTS && !size8) v = BigInt(this.#csts);
    else return { status: Status.InvalidField };
    return { status: Status.Success, dw0: Number(v & 0xffffffffn), dw1: Number(v >> 32n) }; 
  }

  /** Property Set of CC (Base 2.0 §3.1.4.5): EN 0→1 sets CSTS.RDY, 1→0 resets; SHN (15:14) ≠ 0 completes a shutdown (CSTS.SHST 10b). */
  propertySet(offset: number, size8: boolean, value: bigint): Completion {
    if (offset !== Property.CC || size8) return { status: Status.InvalidField };
    const cc = Number(value & 0xffffffffn);
    const wasEnabled = (this.#cc & 1) !== 0;
    this.#cc = cc;
    if ((cc & 1) !== 0 && !wasEnabled) this.#csts |= 1;
    if ((cc & 1) === 0 && wasEnabled) {
      // A controller reset: the I/O queues go (Base 2.0 §3.7.2).
      this.#csts &= ~1;
      for (const [qid, q] of [...this.queues]) if (qid !== 0) q.close('CC.EN cleared (controller reset)');
    }
    if (((cc >> 14) & 3) !== 0) this.#csts = (this.#csts & ~0x0c) | 0x08;
    else this.#csts &= ~0x0c;
    return { status: Status.Success };
  }

  /** An admin command (Base 2.0 §5), checked; Fabrics commands are the connection's. */
  prepareAdmin(sqe: Buffer): PreparedIo | { status: NvmeStatus } {
    const now = (c: Completion): PreparedIo => ({ length: c.data?.length ?? 0, dir: c.data ? 'c2h' : 'none', run: () => Promise.resolve(c) });
    switch (sqe[0]) {
      case AdminOpcode.KeepAlive:
        this.keepAlive();
        this.checkAna();
        return now({ status: Status.Success });
      case AdminOpcode.Identify:
        return this.#identify(sqe);
      case AdminOpcode.GetLogPage:
        return this.#logPage(sqe);
      case AdminOpcode.GetFeatures:
      case AdminOpcode.SetFeatures: {
        const c = this.#feature(sqe, sqe[0] === AdminOpcode.SetFeatures);
        return c.status === Status.Success ? now(c) : { status: c.status };
      }
      case AdminOpcode.AsyncEventRequest: {
        if (this.#aers.length >= 4) return { status: Status.AsyncEventLimitExceeded };
        return { length: 0, dir: 'none', run: () => new Promise<Completion>((resolve) => { this.#aers.push(resolve); this.#deliver(); }) };
      }
      case AdminOpcode.Abort:
        // Abort (Base 2.0 §5.1): DW0 bit 0 = 1, the command was not aborted; commands here run to completion.
        return now({ status: Status.Success, dw0: 1 });
      default:
        return { status: Status.InvalidOpcode };
    }
  }

  #identify(sqe: Buffer): PreparedIo | { status: NvmeStatus } {
    // CDW10: CNS bits 7:0, CNTID 31:16; CDW11: CSI bits 31:24 (Base 2.0 §5.17.1).
    const cns = cdw(sqe, 10) & 0xff;
    const nsid = sqe.readUInt32LE(4);
    const csi = cdw(sqe, 11) >>> 24;
    const out = (data: Buffer): PreparedIo => ({ length: data.length, dir: 'c2h', run: () => Promise.resolve({ status: Status.Success, data }) });
    const env = this.o.env;
    if (cns === 0x01) {
      return out(
        identifyController({
          serial: serialOf(this.o.subsystem.nqn),
          model: this.discovery ? 'rblk discovery' : 'rblk',
          firmware: '1.0',
          cntlid: this.cntlid,
          subnqn: this.discovery ? DISCOVERY_NQN : this.o.subsystem.nqn,
          type: this.discovery ? 2 : 1,
          mdts: Math.max(1, Math.floor(Math.log2(env.limits.maxIo / 4096))),
          maxcmd: this.o.maxQueueSize,
          nn: MAX_NSID,
          // One namespace per volume, and a volume has one of the 256 LUNs (config: lun 0-255).
          mnan: 256,
          inCapsuleData: inCapsuleBytes(env),
          kas: KAS,
          anaGroups: this.discovery ? 0 : this.anaGroup,
        }),
      );
    }
    if (this.discovery) return { status: Status.InvalidField };
    if (cns === 0x02) return out(activeNamespaceList([...this.namespaces.keys()], nsid));
    if (cns === 0x00 || cns === 0x03) {
      if (nsid === 0 || nsid > MAX_NSID) return { status: Status.InvalidNamespace };
      const ns = this.namespaces.get(nsid);
      // An inactive NSID gets a zero-filled structure (Base 2.0 §5.17.2.1); no descriptors for it.
      if (ns === undefined) return cns === 0x00 ? out(Buffer.alloc(4096)) : { status: Status.InvalidNamespace };
      const lu = ns.lu;
      if (cns === 0x03) return out(namespaceDescriptors({ nguid: lu.naa, uuid: lu.identifier, csi: 0 }));
      return out(
        identifyNamespace({
          blocks: lu.blocks,
          blockSize: lu.blockSize,
          thin: lu.thin,
          // NSATTR's write protect is the namespace's state now (NVM Express Base 2.0 §5.17.2.1), SCSI's SWP included.
          readOnly: ns.access !== 'rw' || lu.modes.swp,
          nguid: lu.naa,
          deallocGranularity: lu.limits.unmapGranularity,
          anaGroup: this.anaGroup,
          rescap: RESCAP,
        }),
      );
    }
    if (cns === 0x05 && csi === 0) return out(Buffer.alloc(4096)); // I/O Command Set specific Identify Namespace (NVM: nothing beyond CNS 00h)
    if (cns === 0x06 && csi === 0) return out(Buffer.alloc(4096)); // I/O Command Set specific Identify Controller (NVM: all reserved/zero)
    return { status: Status.InvalidField };
  }

  #logPage(sqe: Buffer): PreparedIo | { status: NvmeStatus } {
    // CDW10: LID 7:0, NUMDL 31:16; CDW11: NUMDU 15:0; CDW12/13: LPOL/LPOU (Base 2.0 §5.16).
    const lid = cdw(sqe, 10) & 0xff;
    const numd = ((cdw(sqe, 10) >>> 16) | ((cdw(sqe, 11) & 0xffff) << 16)) + 1;
    const offset = Number((BigInt(cdw(sqe, 13)) << 32n) | BigInt(cdw(sqe, 12)));
    const length = numd * 4;
    if (length > this.o.env.limits.maxIo) return { status: Status.InvalidField };
    let page: Buffer;
    if (lid === 0x70 && this.discovery) page = this.#discoveryLog();
    else if (this.discovery) return { status: Status.InvalidLogPage };
    else if (lid === 0x01) page = Buffer.alloc(64); // Error Information (§5.16.1.2): no entries kept, ERROR COUNT 0
    else if (lid === 0x02) page = this.#smart();
    else if (lid === 0x03) page = firmwareSlots();
    else if (lid === 0x0c) {
      // LSP (CDW10 bits 14:8) bit 0 RGO: groups only.
      this.checkAna();
      const rgo = ((cdw(sqe, 10) >> 8) & 1) === 1;
      page = anaLog(this.#anaChanges, [{ id: this.anaGroup, state: this.#anaState, nsids: [...this.namespaces.keys()] }], rgo);
    }
    else if (lid === 0x80) page = this.#reservationLog(offset, (cdw(sqe, 10) & (1 << 15)) !== 0);
    else if (lid === 0x04) {
      page = changedNamespaceList([...this.#changed].sort((a, b) => a - b));
      // Reading it clears it, and re-arms the notice unless RAE (CDW10 bit 15) is set (§5.16.1.5).
      if ((cdw(sqe, 10) & (1 << 15)) === 0) this.#changed.clear();
    } else return { status: Status.InvalidLogPage };
    if (offset > page.length || offset % 4 !== 0) return { status: Status.InvalidField };
    const data = Buffer.alloc(length);
    page.copy(data, 0, offset, Math.min(page.length, offset + length));
    return { length, dir: 'c2h', run: () => Promise.resolve({ status: Status.Success, data }) };
  }

  #discoveryLog(): Buffer {
    const entries: DiscoveryEntry[] = [...this.o.subsystem.listeners].map((l) => ({
      adrfam: l.address.includes(':') ? 2 : 1,
      subtype: 2,
      portid: l.portId,
      trsvcid: String(l.port),
      subnqn: this.o.subsystem.nqn,
      traddr: l.address,
    }));
    return discoveryLog(this.o.subsystem.genctr, entries);
  }

  #smart(): Buffer {
    let rb = 0;
    let wb = 0;
    let r = 0;
    let w = 0;
    let ro = true;
    for (const ns of this.namespaces.values()) {
      const [read, write] = ns.lu.stats.classes;
      rb += read.bytes;
      wb += write.bytes;
      r += read.ops;
      w += write.ops;
      if (ns.access === 'rw') ro = false;
    }
    // Data units: thousands of 512-byte units, rounded up (§5.16.1.3).
    const units = (b: number) => BigInt(Math.ceil(b / 512 / 1000));
    const spaceLow = [...this.namespaces.values()].some((ns) => ns.lu.spaceLow);
    const critical = (ro && this.namespaces.size > 0 ? 1 << 3 : 0) | (spaceLow ? 1 : 0);
    return smartLog({ unitsRead: units(rb), unitsWritten: units(wb), reads: BigInt(r), writes: BigInt(w), critical });
  }

  #feature(sqe: Buffer, set: boolean): Completion {
    // CDW10: FID 7:0, SEL 10:8 (Get) / SV bit 31 (Set); CDW11 the value (Base 2.0 §5.15, §5.27).
    const fid = cdw(sqe, 10) & 0xff;
    const v = cdw(sqe, 11);
    if (set && (cdw(sqe, 10) & (1 << 31)) !== 0) return { status: Status.FeatureNotSaveable };
    switch (fid) {
      case 0x07: {
        // Number of Queues: NSQR 15:0, NCQR 31:16, 0's based; the reply is what is granted, and Get
        // Features reports it too. Once an I/O queue exists the count is fixed: a Set then is a
        // Command Sequence Error (Base 2.0 §5.27.1.5), and a Connect beyond it is refused (fabrics.ts).
        if (this.discovery) return { status: Status.InvalidField };
        if (!set) return { status: Status.Success, dw0: this.#grantedQueues };
        if ((v & 0xffff) === 0xffff || v >>> 16 === 0xffff) return { status: Status.InvalidField };
        if ([...this.queues.keys()].some((qid) => qid !== 0)) return { status: Status.CommandSequenceError };
        const n = MAX_IO_QUEUES - 1;
        this.#grantedQueues = Math.min(v & 0xffff, n) | (Math.min(v >>> 16, n) << 16);
        return { status: Status.Success, dw0: this.#grantedQueues };
      }
      case 0x0f:
        // Keep Alive Timer: KATO in ms (§5.27.1.12).
        if (set) {
          this.#kato = v;
          this.keepAlive();
          return { status: Status.Success };
        }
        return { status: Status.Success, dw0: this.#kato };
      case 0x0b:
        // Asynchronous Event Configuration (§5.27.1.7): bit 0 (SMART available spare), bit 8 Namespace Attribute Notices and bit 11 ANA Change Notices are what we raise.
        if (set) {
          this.#aec = v & (1 | (1 << 8) | (1 << 11));
          return { status: Status.Success };
        }
        return { status: Status.Success, dw0: this.#aec };
      case 0x81:
        // Host Identifier (§5.27.1.25): the 128-bit HOSTID from Connect (CDW11 EXHID bit 0 must ask for it);
        // on fabrics it is set by Connect only (NVMe-oF 1.1 §3.3), so Set Features is refused.
        if (set || (v & 1) === 0) return { status: Status.InvalidField };
        return { status: Status.Success, data: Buffer.from(this.hostid) };
      case 0x82: {
        // Reservation Notification Mask (Base 2.0 §5.27.1, "Reservation Notification Mask"): namespace specific,
        // CDW11 REGPRE bit 1, RESREL bit 2, RESPRE bit 3; Set with NSID FFFFFFFFh sets every attached namespace's.
        if (this.discovery) return { status: Status.InvalidField };
        const nsid = sqe.readUInt32LE(4);
        if (set && nsid === 0xffffffff) {
          for (const n of this.namespaces.keys()) this.#resvMask.set(n, v & RESV_MASK_BITS);
          return { status: Status.Success };
        }
        if (!this.namespaces.has(nsid)) return { status: nsid === 0xffffffff ? Status.InvalidField : Status.InvalidNamespace };
        if (set) {
          this.#resvMask.set(nsid, v & RESV_MASK_BITS);
          return { status: Status.Success };
        }
        return { status: Status.Success, dw0: this.#resvMask.get(nsid) ?? 0 };
      }
      case 0x06:
        // Volatile Write Cache (§5.27.1.4): WCE bit 0; on, as the backends honour Flush and FUA.
        if (this.discovery) return { status: Status.InvalidField };
        if (set) return (v & 1) === 1 ? { status: Status.Success } : { status: Status.InvalidField };
        return { status: Status.Success, dw0: 1 };
      default:
        return { status: Status.InvalidField };
    }
  }
}

/** IOCCSZ's in-capsule part: limits.in_capsule_data rounded down to 16 bytes, at least 0. */
export function inCapsuleBytes(env: ConnectionEnvironment): number {
  return Math.max(0, Math.floor(env.limits.inCapsuleData / 16) * 16);
}

/** SN (20 ASCII characters): stable for the subsystem, from its NQN. */
function serialOf(nqn: string): string {
  let h = 0x811c9dc5;
  for (const c of Buffer.from(nqn)) h = Math.imul(h ^ c, 0x01000193) >>> 0;
  let h2 = 0x9e3779b1;
  for (const c of Buffer.from(nqn)) h2 = Math.imul(h2 ^ c, 0x85ebca6b) >>> 0;
  return (h.toString(16).padStart(8, '0') + h2.toString(16).padStart(8, '0')).slice(0, 20);
}

/** Firmware Slot Information, log 03h (Base 2.0 §5.16.1.4): slot 1 active, revision "1.0". */
function firmwareSlots(): Buffer {
  const b = Buffer.alloc(512);
  b[0] = 1; // AFI: slot 1 active
  b.write('1.0     ', 8, 'ascii'); // FRS1
  return b;
}
