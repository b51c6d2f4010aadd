// One NVMe controller as a host brings it up over NVMe/TCP (NVMe-oF 1.1 §3.3,
// Base 2.0 §3.5.1 "Memory-based Controller Initialization" as fabrics do it):
// the admin queue's Connect makes the controller (dynamic model, CNTLID
// FFFFh); Property Get CAP and VS; Property Set CC.EN (with IOSQES/IOCQES)
// and a wait for CSTS.RDY within CAP.TO; Identify Controller; Set Features
// Number of Queues; the ANA log when the controller reports ANA; then the
// I/O queues, each its own connection joining by CNTLID. Keep Alive runs on
// the admin queue every KATO/2 (Base 2.0 §3.9.5), and also rereads the ANA
// log. Losing any of its queues loses the controller: the session
// (session.ts) brings up a new association, as Linux's host resets a
// controller on any queue's error (docs/nvme.md "The rblk library as an
// NVMe/TCP host").
import { AdminOpcode, buildSqe, DISCOVERY_NQN, isSuccess, Property, propertyGetSqe, propertySetSqe } from '../../protocol/nvme/command.js';
import { parseActiveNamespaceList, parseAnaLog, parseIdentifyController, parseIdentifyNamespace, parseNamespaceDescriptors, type ControllerInfo, type NamespaceInfo } from '../../protocol/nvme/identify.js';
import type { Digests } from '../../protocol/nvme/pdu.js';
import { RblkError } from '../errors.js';
import { ADMIN_IN_CAPSULE, describeStatus, NvmeQueue, type Command, type Completion } from './queue.js';

/** Admin queue entries (SQSIZE ≥ 31, NVMe-oF 1.1 §3.3). */
const ADMIN_QUEUE_SIZE = 32;

export interface ControllerOptions {
  address: string;
  port: number;
  subnqn: string;
  hostnqn: string;
  hostid: Buffer;
  digests: Digests;
  /** I/O queues wanted; fewer if the controller grants fewer. 0 for a discovery controller. */
  ioQueues: number;
  /** Entries wanted per I/O queue; capped by CAP.MQES + 1. */
  queueSize: number;
  /** Keep Alive Timeout asked for at Connect, ms. */
  kato: number;
  connectTimeoutMs: number;
  commandTimeoutMs: number;
  /** Connect the I/O queues with SQ flow control disabled (queue.ts disableSqFlowControl). */
  disableSqFlowControl?: boolean;
}

/** ANA states (Base 2.0 §8.20.3). */
export const ANA_OPTIMIZED = 1;
export const ANA_NON_OPTIMIZED = 2;

export class NvmeController {
  readonly admin: NvmeQueue;
  readonly io: NvmeQueue[] = [];
  info!: ControllerInfo;
  /** CAP.MQES + 1. */
  maxQueueEntries = 0;
  /** The largest data transfer (MDTS), bytes; Infinity when unlimited. */
  maxTransfer = Infinity;
  /** ANA state per NSID, from log 0Ch; empty without ANA reporting. */
  readonly ana = new Map<number, number>();
  /** The queue this tick's commands go to (pick). */
  #batch: NvmeQueue | null = null;
  #next = 0;
  #keepAlive: NodeJS.Timeout | null = null;
  #closed = false;
  #onLost: ((why: string) => void) | null = null;

  private constructor(
    readonly o: ControllerOptions,
    admin: NvmeQueue,
  ) {
    this.admin = admin;
  }

  get cntlid(): number {
    return this.admin.cntlid;
  }

  get where(): string {
    return `${this.o.address}:${this.o.port}`;
  }

  /** Brings the controller up with its I/O queues; rejects with a typed error and leaves nothing open. */
  static async open(o: ControllerOptions): Promise<NvmeController> {
    const admin = await NvmeQueue.open({ ...o, qid: 0, size: ADMIN_QUEUE_SIZE, cntlid: 0xffff, inCapsule: ADMIN_IN_CAPSULE, disableSqFlowControl: false });
    const c = new NvmeController(o, admin);
    try {
      await c.#enable();
      if (o.ioQueues > 0) await c.#openIoQueues();
    } catch (e) {
      c.close();
      throw e;
    }
    admin.onLost = (e) => c.#lost(e.why);
    for (const q of c.io) q.onLost = (e) => c.#lost(e.why);
    if (o.kato > 0) {
      // Keep Alive at half of KATO, so a late one still lands within it (Base 2.0 §3.9.5).
      c.#keepAlive = setInterval(() => void c.#tick(), Math.max(100, Math.floor(o.kato / 2)));
      c.#keepAlive.unref();
    }
    return c;
  }

  set onLost(f: ((why: string) => void) | null) {
    this.#onLost = f;
  }

  async adminCommand(cmd: Command, what: string): Promise<Completion> {
    const c = await this.admin.submitWithin(cmd, this.o.commandTimeoutMs || 30_000, what);
    if (!isSuccess(c.status)) throw new RblkError('IO_ERROR', `${what} at ${this.where}: ${describeStatus(c.status)}`, { cause: c.status });
    return c;
  }

  async #enable(): Promise<void> {
    const t = this.o.connectTimeoutMs;
    const cap = await this.admin.submitWithin({ sqe: propertyGetSqe(0, Property.CAP, true) }, t, 'Property Get CAP');
    if (!isSuccess(cap.status)) throw new RblkError('LOGIN_FAILED', `Property Get CAP at ${this.where}: ${describeStatus(cap.status)}`);
    const capValue = BigInt(cap.dw0 >>> 0) | (BigInt(cap.dw1 >>> 0) << 32n);
    // CAP (Base 2.0 §3.1.4.1): MQES 15:0 (0's based), TO 31:24 in 500 ms units.
    this.maxQueueEntries = Number(capValue & 0xffffn) + 1;
    const readyMs = Math.max(500, Number((capValue >> 24n) & 0xffn) * 500);
    // CC (§3.1.4.5): EN bit 0, CSS 6:4 = 0 (NVM), MPS 10:7 = 0 (4 KiB), IOSQES 19:16 = 6, IOCQES 23:20 = 4.
    const cc = 1n | (6n << 16n) | (4n << 20n);
    const set = await this.admin.submitWithin({ sqe: propertySetSqe(0, Property.CC, false, cc) }, t, 'Property Set CC');
    if (!isSuccess(set.status)) throw new RblkError('LOGIN_FAILED', `Property Set CC.EN at ${this.where}: ${describeStatus(set.status)}`);
    // CSTS.RDY (bit 0) within CAP.TO; CSTS.CFS (bit 1) is a fatal controller status.
    const until = performance.now() + readyMs;
    for (;;) {
      const s = await this.admin.submitWithin({ sqe: propertyGetSqe(0, Property.CSTS, false) }, t, 'Property Get CSTS');
      if (!isSuccess(s.status)) throw new RblkError('LOGIN_FAILED', `Property Get CSTS at ${this.where}: ${describeStatus(s.status)}`);
      if ((s.dw0 & 2) !== 0) throw new RblkError('LOGIN_FAILED', `controller at ${this.where} reports Controller Fatal Status`);
      if ((s.dw0 & 1) !== 0) break;
      if (performance.now() > until) throw new RblkError('LOGIN_FAILED', `controller at ${this.where} not ready within CAP.TO (${readyMs} ms)`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const id = await this.identify(0x01, 0);
    this.info = parseIdentifyController(id);
    // MDTS (Identify Controller 77): 2^MDTS units of the minimum page (CAP.MPSMIN 0: 4 KiB); 0 is no limit.
    this.maxTransfer = this.info.mdts === 0 ? Infinity : 4096 * 2 ** this.info.mdts;
    if (this.o.subnqn !== DISCOVERY_NQN && this.info.anaReporting) await this.refreshAna();
  }

  /** Set Features Number of Queues (FID 07h, Base 2.0 §5.27.1.5), then one Connect per I/O queue. */
  async #openIoQueues(): Promise<void> {
    const want = this.o.ioQueues;
    const nq = await this.adminCommand({ sqe: buildSqe({ opcode: AdminOpcode.SetFeatures, cid: 0, cdw: { 10: 0x07, 11: ((want - 1) << 16) | (want - 1) } }) }, 'Set Features Number of Queues');
    const granted = Math.min((nq.dw0 & 0xffff) + 1, (nq.dw0 >>> 16) + 1);
    const n = Math.max(1, Math.min(want, granted));
    const size = Math.max(2, Math.min(this.o.queueSize, this.maxQueueEntries));
    // IOCCSZ (NVMe-oF 1.1 §4.1): 16-byte units including the 64-byte SQE.
    const inCapsule = Math.max(0, this.info.ioccsz * 16 - 64);
    const opened = await Promise.allSettled(
      Array.from({ length: n }, (_, i) => NvmeQueue.open({ ...this.o, qid: i + 1, size, cntlid: this.cntlid, inCapsule, kato: 0 })),
    );
    for (const r of opened) if (r.status === 'fulfilled') this.io.push(r.value);
    const failed = opened.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  }

  /** Identify (Base 2.0 §5.17): CNS in CDW10 bits 7:0; 4096 bytes. */
  async identify(cns: number, nsid: number): Promise<Buffer> {
    const c = await this.adminCommand({ sqe: buildSqe({ opcode: AdminOpcode.Identify, cid: 0, nsid, cdw: { 10: cns } }), readLength: 4096 }, `Identify CNS ${cns}`);
    return c.data!;
  }

  async namespace(nsid: number): Promise<NamespaceInfo> {
    return parseIdentifyNamespace(await this.identify(0x00, nsid));
  }

  /** The namespace's identifiers (CNS 03h); empty when the controller has no such list. */
  async namespaceIds(nsid: number): Promise<ReturnType<typeof parseNamespaceDescriptors>> {
    return parseNamespaceDescriptors(await this.identify(0x03, nsid));
  }

  async activeNamespaces(): Promise<number[]> {
    return parseActiveNamespaceList(await this.identify(0x02, 0));
  }

  /** Get Log Page (Base 2.0 §5.16): LID CDW10 7:0, NUMDL 31:16, NUMDU CDW11 15:0 (dwords, 0's based), LPOL/LPOU CDW12/13. */
  async logPage(lid: number, length: number, offset = 0, lsp = 0): Promise<Buffer> {
    const numd = length / 4 - 1;
    const sqe = buildSqe({ opcode: AdminOpcode.GetLogPage, cid: 0, nsid: 0xffffffff, cdw: { 10: lid | ((lsp & 0x7f) << 8) | ((numd & 0xffff) << 16), 11: numd >>> 16, 12: offset, 13: 0 } });
    return (await this.adminCommand({ sqe, readLength: length }, `Get Log Page ${lid.toString(16)}h`)).data!;
  }

  /** The ANA log (0Ch): each NSID's state (Base 2.0 §8.20). */
  async refreshAna(): Promise<void> {
    const log = parseAnaLog(await this.logPage(0x0c, 4096));
    this.ana.clear();
    for (const g of log.groups) for (const n of g.nsids) this.ana.set(n, g.state);
  }

  /**
   * The I/O queue for the next command: the one the last command went to
   * while it has a free entry, else the next with room, round robin. A
   * queue is one connection, and both this host and rblkd's NVMe/TCP
   * listener serve every connection on one JavaScript thread, so spreading a
   * load that one queue can hold over four gains no parallelism and costs a
   * read and a write per connection per turn where one would do: commands
   * kept on one queue leave in one write (queue.ts #send), reach rblkd in one
   * read and are answered in one writev. With the host's writes once per
   * turn (queue.ts #send) this took rblkd from 0.093 writev and 0.147 reads
   * per 4 KiB QD32 read, when a new queue was picked each tick, to 0.031 and
   * 0.063 (docs/performance.md "NVMe/TCP: fewer objects per command"). A load
   * deeper than one queue still spreads over the others.
   */
  pick(): NvmeQueue {
    const open = this.#batch;
    if (open !== null && open.outstanding < open.depth) return open;
    const q = this.#roundRobin();
    this.#batch = q;
    return q;
  }

  #roundRobin(): NvmeQueue {
    const n = this.io.length;
    for (let i = 0; i < n; i++) {
      const q = this.io[(this.#next + i) % n];
      if (q.outstanding < q.depth) {
        this.#next = (this.#next + i + 1) % n;
        return q;
      }
    }
    const q = this.io[this.#next];
    this.#next = (this.#next + 1) % n;
    return q;
  }

  async #tick(): Promise<void> {
    if (this.#closed) return;
    try {
      await this.adminCommand({ sqe: buildSqe({ opcode: AdminOpcode.KeepAlive, cid: 0 }) }, 'Keep Alive');
      if (this.info.anaReporting) await this.refreshAna();
    } catch (e) {
      // A Keep Alive that fails or goes unanswered: the controller cannot be trusted to be there.
      this.#lost(e instanceof Error ? e.message : String(e));
    }
  }

  #lost(why: string): void {
    if (this.#closed) return;
    const f = this.#onLost;
    this.close();
    f?.(why);
  }

  /** Ends every queue's connection (the admin queue's end is the controller's, NVMe-oF 1.1 §3.5). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#onLost = null;
    if (this.#keepAlive) clearInterval(this.#keepAlive);
    for (const q of this.io) q.close('controller closed');
    this.admin.close('controller closed');
  }

  /**
   * A clean end (Base 2.0 §3.6.2 shutdown via CC.SHN = 01b) before closing, bounded;
   * the queues are closed whatever the controller answers.
   */
  async shutdown(): Promise<void> {
    if (this.#closed) return;
    this.#onLost = null;
    if (this.#keepAlive) clearInterval(this.#keepAlive);
    try {
      const cc = 1n | (6n << 16n) | (4n << 20n) | (1n << 14n);
      await this.admin.submitWithin({ sqe: propertySetSqe(0, Property.CC, false, cc) }, 1000, 'Property Set CC.SHN');
    } catch {
      // Gone already: nothing to shut down.
    }
    this.close();
  }
}
