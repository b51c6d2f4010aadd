// The target's native fast path on one connection (native/src/core/fast-path.h;
// docs/target.md "Fast path"): READ and WRITE to file and block-device volumes
// handled in C++ from the receive to the response. This wrapper owns its
// memory (data slots and response slots, registered once), turns the native
// onIdle callback into promises, and is what the target transport hands the
// session. It knows nothing of SCSI beyond the eligibility record's fields.
import { addon, nativeFeatures, uringAddon, type NativeFastLun, type NativeFastPath, type NativeFastPathStats } from './binding.js';
import { FabricError } from './fabric-error.js';
import type { Endpoint, MemoryRegion } from './fabric.js';
import type { Reactors } from './reactors.js';

export type FastPathLun = NativeFastLun;
export type FastPathStats = NativeFastPathStats;
export type FastPathFailure = 'read' | 'write' | 'transfer';

export interface FastPathOptions {
  /** Commands at once (each holds one slot). */
  slots: number;
  /** Largest transfer the fast path takes, bytes (a multiple of 4096). */
  slotSize: number;
  maxCapsule: number;
  maxTransfer: number;
  maxImmediate: number;
  credits: number;
  /** Version 2: a GOOD read is answered by its data write's remote CQ data, no RSP (docs/protocol.md §12.1). */
  remoteData?: boolean;
  /** Version 5: a received message may be a train of CMDs (docs/protocol.md §5.1), taken one by one. */
  trains?: boolean;
  /** Upper bounds of the latency histogram's buckets, seconds (takeCounts). */
  latencyBuckets?: readonly number[];
  /** Serve the connection's data path on one of these threads (native/reactors.ts). */
  reactors?: Reactors | null;
}

/** Bytes of RSP slot per command (native/src/core/fast-path.cc kRspSlot). */
const RSP_SLOT = 64;

export class FastPath {
  readonly #native: NativeFastPath;
  readonly #region: MemoryRegion;
  readonly #idle = new Map<number, (() => void)[]>();
  #closed = false;
  /** A command the fast path gave back: an I/O error for the session to answer, or a failed transfer. */
  onFailed: ((tag: bigint, lun: number, kind: FastPathFailure, errno: number, length: number) => void) | null = null;

  /** Whether this host can run one: the io_uring part must load (docs/architecture.md "Loading the addon"). */
  static available(): boolean {
    return nativeFeatures().io_uring;
  }

  constructor(ep: Endpoint, opts: FastPathOptions) {
    this.#region = ep.domain.register(opts.slots * (opts.slotSize + RSP_SLOT));
    try {
      this.#native = new (addon().FastPath)(
        ep.native,
        this.#region.native,
        uringAddon().fastRingApi(),
        { ...opts, ordered: ep.domain.ordersSendAfterWrite, reactors: opts.reactors?.native ?? undefined },
        (tag, lun, kind, errno, length) => this.onFailed?.(tag, lun, kind, errno, length),
        (lun) => this.#wake(lun),
      );
    } catch (e) {
      void this.#region.close().catch(() => undefined);
      throw FabricError.from(e);
    }
  }

  /** Publishes (or updates) the LUN's eligibility record and allows it. */
  setLun(lun: number, record: FastPathLun): void {
    if (!this.#closed) this.#native.setLun(lun, record);
  }

  /** From this call on, no new command on the LUN runs natively. */
  revoke(lun: number): void {
    if (!this.#closed) this.#native.revoke(lun);
  }

  /** The connection is closing: the commands parked for their QoS turn end unrun (the initiator reissues them elsewhere); returns how many. */
  dropParked(): number {
    return this.#closed ? 0 : this.#native.dropParked();
  }

  inFlight(lun?: number): number {
    return this.#closed ? 0 : this.#native.inFlight(lun);
  }

  hasTag(tag: bigint): boolean {
    return !this.#closed && this.#native.hasTag(tag);
  }

  /** The session's own outstanding commands and its credits (the fast path takes nothing while JS holds any). */
  setCounters(jsOutstanding: number, credits: number): void {
    if (!this.#closed) this.#native.setCounters(jsOutstanding, credits);
  }

  /**
   * What the fast path answered GOOD on the LUN since the last call, then
   * zeroed: out gets [readOps, readBytes, readSeconds, writeOps, writeBytes,
   * writeSeconds, read buckets..., write buckets...] (latencyBuckets.length + 1
   * each). Returns the ops.
   */
  takeCounts(lun: number, out: Float64Array): number {
    // Also after close: the last commands' counts stay until taken.
    return this.#native.takeCounts(lun, out);
  }

  get stats(): FastPathStats {
    return this.#closed ? { taken: 0, handedOff: 0, inFlight: 0, answeredByData: 0, ioInline: 0, trains: 0, qosDeferred: 0, qosParked: 0, qosReleased: 0, qosWaiting: 0, reactor: -1, corked: 0, uncorked: 0 } : this.#native.stats;
  }

  /** Resolves when no fast-path command is running on the LUN (revoke first, or more may start). */
  idle(lun: number): Promise<void> {
    if (this.#closed || this.#native.inFlight(lun, true) === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const list = this.#idle.get(lun) ?? [];
      list.push(resolve);
      this.#idle.set(lun, list);
    });
  }

  #wake(lun: number): void {
    const list = this.#idle.get(lun);
    this.#idle.delete(lun);
    // Resolved, not called: the native side is mid-completion.
    for (const w of list ?? []) w();
  }

  /**
   * Called within close() when backend requests outlive it (the ring's on a
   * slow device, librbd's: a write among them may still land), with a promise
   * that resolves once they have all ended.
   */
  onOrphans: ((settled: Promise<void>) => void) | null = null;

  /** Frees everything; requests still in the ring or in librbd keep the slots' memory until they end (onOrphans). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    let settle!: () => void;
    const settled = new Promise<void>((resolve) => (settle = resolve));
    if (this.#native.close(() => settle()) > 0) this.onOrphans?.(settled);
    for (const lun of [...this.#idle.keys()]) this.#wake(lun);
    await this.#region.close();
  }
}
