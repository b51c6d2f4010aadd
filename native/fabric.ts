// The typed, promise-based face of the native libfabric layer. It knows
// nothing of SCSI or of rblk's wire protocol: it moves bytes between
// registered memory and peers (send/recv, RMA read/write, atomics).
//
// Ownership follows libfabric's: a Domain owns its Listeners, Endpoints and
// MemoryRegions, and close() unwinds them in reverse order of opening.
//
// Over 600 lines: that unwinding reaches into each class's private state
// (a Domain closes its Endpoints and Listeners, a Listener hands accepted
// Endpoints their domain), so the four classes are kept in one module
// rather than four that would form an import cycle.
import { EventEmitter } from 'node:events';
import {
  addon,
  type NativeCmEvent,
  type EndpointWakeups,
  type NativeConstants,
  type NativeDomain,
  type NativeEndpoint,
  type NativeIov,
  type NativeListener,
  type NativeMemoryRegion,
  type NativePages,
  type NativeRmaIov,
  type MrModeRequest,
  type EndpointType,
  type ProviderInfo,
} from './binding.js';
import { MAX_BUSY_POLL_US } from './busy-poll.js';
// A peer's registered memory is the wire's DataDescriptor (address, key,
// length), one type from the fabric up (docs/architecture.md "Words"). The
// import is type-only, erased at compile time: the fabric loads nothing of
// the protocol.
import type { DataDescriptor } from '../protocol/wire/fields.js';
import { FabricError, FI_EAGAIN, FI_ECANCELED, FI_ESHUTDOWN, FI_ETIMEDOUT } from './fabric-error.js';

export { FabricError } from './fabric-error.js';
export type { EndpointType, EndpointWakeups, MrModeRequest, ProviderInfo } from './binding.js';

/** The context word of a batch entry that is a peer's remote CQ data (native/src/core/endpoint.cc kRemoteData). */
const REMOTE_DATA = 0xffffffff;

// Read when used, not at import: importing rblk must not load the addon (binding.ts).
const C = (): NativeConstants => addon().constants;

/** Providers on this host that offer FI_EP_MSG with RMA (e.g. tcp, sockets, verbs). */
export function availableProviders(): string[] {
  return addon().providers();
}

/** Providers on this host that offer FI_EP_RDM with RMA (e.g. shm, tcp;ofi_rxm). */
export function availableRdmProviders(): string[] {
  return addon().providers('rdm');
}

/**
 * Whether a provider name is one of FI_EP_RDM endpoints: shm, a utility
 * provider layered for RDM (`tcp;ofi_rxm`, `verbs;ofi_rxm`, `udp;ofi_rxd`),
 * or a fabric that only has RDM (efa, psm2, psm3, cxi, opx). See
 * docs/transport.md "RDM endpoints".
 */
export function isRdmProvider(provider: string): boolean {
  return provider === 'shm' || /;ofi_rx[md]$/.test(provider) || ['efa', 'psm2', 'psm3', 'cxi', 'opx'].includes(provider);
}

/** `verbs` when an RDMA device is present, else `tcp` (docs/architecture.md "Fabric"). */
export function defaultProvider(): string {
  return availableProviders().includes('verbs') ? 'verbs' : 'tcp';
}

function resolveProvider(p: string | undefined): string {
  return p === undefined || p === 'auto' ? defaultProvider() : p;
}

export interface DomainOptions {
  /** libfabric provider name, or 'auto' (the default). */
  provider?: string;
  /** An address on the interface to use (selects the domain, e.g. `lo` for 127.0.0.1). */
  address?: string;
  /**
   * 'basic' asks for FI_MR_BASIC (virtual addresses, provider-chosen keys: the
   * verbs rules) on providers that would otherwise need neither; see
   * docs/transport.md "Memory-registration modes". Default: $RBLK_FI_MR_MODE,
   * else 'default'.
   */
  mrMode?: MrModeRequest;
  /**
   * FI_THREAD_SAFE instead of FI_THREAD_DOMAIN: reactor threads will drive
   * some of the domain's endpoints (native/reactors.ts, docs/target.md "Reactors").
   */
  threadSafe?: boolean;
}

const MR_MODES: readonly MrModeRequest[] = ['default', 'basic'];

/** The mrMode from $RBLK_FI_MR_MODE; an unknown value is an error, never ignored. */
export function mrModeFromEnv(env: NodeJS.ProcessEnv = process.env): MrModeRequest {
  const v = env.RBLK_FI_MR_MODE;
  if (v === undefined || v === '') return 'default';
  const m = MR_MODES.find((x) => x === v);
  if (m === undefined) throw new RangeError(`RBLK_FI_MR_MODE=${v}: must be one of ${MR_MODES.join(', ')}`);
  return m;
}

/** A piece of registered memory. */
export interface Slice {
  readonly mr: MemoryRegion;
  readonly offset: number;
  readonly length: number;
  /** A view of exactly these bytes. */
  readonly buffer: Buffer;
}

export class Domain {
  readonly info: ProviderInfo;
  readonly native: NativeDomain;
  private readonly children = new Set<{ close(): Promise<void> }>();
  private closed = false;

  private constructor(native: NativeDomain) {
    this.native = native;
    this.info = native.info;
  }

  static open(opts: DomainOptions = {}): Domain {
    const provider = resolveProvider(opts.provider);
    const mrMode = opts.mrMode ?? mrModeFromEnv();
    try {
      const type: EndpointType = isRdmProvider(provider) ? 'rdm' : 'msg';
      return new Domain(new (addon().Domain)(provider, opts.address ?? null, null, false, mrMode, opts.threadSafe ?? false, type));
    } catch (e) {
      throw FabricError.from(e);
    }
  }

  get provider(): string {
    return this.info.provider;
  }
  /** FI_EP_RDM endpoints: peers through an address vector (docs/transport.md "RDM endpoints"). */
  get isRdm(): boolean {
    return this.info.endpointType === 'rdm';
  }
  get hasAtomics(): boolean {
    return this.info.atomics;
  }
  /** Send-after-write ordering: an RMA write's data lands before a later send (FI_ORDER_SAW). */
  get ordersSendAfterWrite(): boolean {
    return (this.info.msgOrder & C().FI_ORDER_SAW) !== 0;
  }
  /**
   * A write can carry 32 bits of remote CQ data (fi_writedata) that the peer's
   * completion queue reports (docs/transport.md "Remote CQ data").
   */
  get hasRemoteData(): boolean {
    return this.info.cqDataSize >= 4;
  }
  /** The provider needs memory bound to one endpoint (FI_MR_ENDPOINT). */
  get needsEndpointMemory(): boolean {
    return (this.info.mrMode & C().FI_MR_ENDPOINT) !== 0;
  }

  private checkOpen(op: string): void {
    if (this.closed) throw new FabricError(9, op, `${op}: the domain is closed`, 'ERR_CLOSED');
  }

  /**
   * Allocates page-aligned memory and registers it once. remote: peers may
   * RDMA-read and -write it (an initiator's I/O pool); otherwise local only.
   * Given Pages, registers those instead: the region's buffer is the pages'
   * view, and closing the region leaves that view alone (docs/architecture.md
   * "Memory").
   */
  register(memory: number | Pages, opts: { remote?: boolean; endpoint?: Endpoint } = {}): MemoryRegion {
    this.checkOpen('fi_mr_reg');
    let native: NativeMemoryRegion;
    try {
      native = new (addon().MemoryRegion)(this.native, typeof memory === 'number' ? memory : memory.native, opts.remote ?? false, opts.endpoint?.native ?? null);
    } catch (e) {
      throw FabricError.from(e);
    }
    const mr = new MemoryRegion(native, () => this.children.delete(mr), typeof memory === 'number' ? undefined : memory.buffer);
    this.children.add(mr);
    return mr;
  }

  /** Listens on address:port (port 0 picks a free one; see listener.port). */
  listen(opts: { address?: string; port?: number } = {}): Listener {
    this.checkOpen('fi_listen');
    const listener = new Listener(this, opts.address ?? '127.0.0.1', opts.port ?? 0, () =>
      this.children.delete(listener),
    );
    this.children.add(listener);
    return listener;
  }

  /**
   * Connects to a listener. prepare runs after the endpoint exists and before
   * fi_connect, so receives can be posted before the peer's first send.
   */
  async connect(opts: {
    address: string;
    port: number;
    privateData?: Buffer;
    timeoutMs?: number;
    prepare?: (ep: Endpoint) => void;
  }): Promise<Endpoint> {
    this.checkOpen('fi_connect');
    const ep = new Endpoint(this, null, 0, opts.address, String(opts.port), () => this.children.delete(ep));
    this.children.add(ep);
    try {
      opts.prepare?.(ep);
      await ep.establish(() => ep.native.connect(opts.address, String(opts.port), opts.privateData ?? null), opts.timeoutMs ?? 10_000);
    } catch (e) {
      if (!ep.isClosed) await ep.close();
      throw e;
    }
    return ep;
  }

  /** @internal */
  adopt(child: { close(): Promise<void> }): void {
    this.children.add(child);
  }
  /** @internal */
  release(child: { close(): Promise<void> }): void {
    this.children.delete(child);
  }

  /**
   * Closes what is open on it, then the domain: listeners and endpoints first
   * (newest first; that cancels their operations), then memory regions, which
   * no operation can be using any more.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const children = [...this.children].reverse();
    for (const child of children) if (!(child instanceof MemoryRegion)) await child.close();
    for (const child of children) if (child instanceof MemoryRegion) await child.close();
    this.native.close();
  }
}

export class MemoryRegion {
  readonly native: NativeMemoryRegion;
  readonly size: number;
  readonly key: bigint;
  /** Remote address of byte 0 (the virtual address under FI_MR_VIRT_ADDR, else 0). */
  readonly remoteBase: bigint;
  private buf: Buffer;
  private inFlight = 0;
  private receives = 0;
  private idle: (() => void) | null = null;
  private closing: Promise<void> | null = null;

  /** @internal view: the registered Pages' buffer, for a region over Pages. */
  constructor(native: NativeMemoryRegion, private readonly onClose: () => void, view?: Buffer) {
    this.native = native;
    this.size = native.size;
    this.key = native.key;
    this.remoteBase = native.remoteBase;
    this.buf = view ?? native.buffer;
  }

  get buffer(): Buffer {
    return this.buf;
  }
  get isClosed(): boolean {
    return this.closing !== null;
  }

  slice(offset: number, length: number): Slice {
    if (this.closing) throw new FabricError(9, 'MemoryRegion.slice', 'MemoryRegion.slice: the memory region is closed', 'ERR_CLOSED');
    if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length < 0 || offset > this.size || length > this.size - offset)
      throw new RangeError(`slice [${offset}, +${length}) is outside the ${this.size}-byte memory region`);
    return { mr: this, offset, length, buffer: this.buf.subarray(offset, offset + length) };
  }

  /** What a peer needs to reach [offset, offset+length) of this region. */
  remote(offset = 0, length = this.size - offset): DataDescriptor {
    return { address: this.remoteBase + BigInt(offset), key: this.key, length };
  }

  /** @internal receive: a posted receive, which only its endpoint's close can retire. */
  hold(receive = false): void {
    this.inFlight++;
    if (receive) this.receives++;
  }
  /** @internal */
  unhold(receive = false): void {
    if (receive) this.receives--;
    if (--this.inFlight === 0 && this.idle) this.idle();
  }

  /**
   * Waits for operations using this memory to settle, detaches every view,
   * deregisters. Posted receives never settle by themselves, so closing a
   * region that still has some is refused: close their endpoint first.
   */
  close(): Promise<void> {
    if (this.closing) return this.closing;
    if (this.receives > 0)
      return Promise.reject(
        new FabricError(16, 'MemoryRegion.close', `MemoryRegion.close: ${this.receives} receive(s) are still posted in this region; close their endpoint first`, 'ERR_BUSY'),
      );
    this.closing = (async () => {
      if (this.inFlight > 0) await new Promise<void>((resolve) => (this.idle = resolve));
      this.native.close();
      this.buf = Buffer.alloc(0);
      this.onClose();
    })();
    return this.closing;
  }
}

/**
 * Page-aligned memory that belongs to no domain: registered on each domain
 * that carries its I/O (Domain.register(pages)), so it outlives any one
 * connection (docs/architecture.md "Memory"). The pages
 * are unmapped once free() has been called, every registration is closed and
 * no operation uses them.
 */
export class Pages {
  readonly native: NativePages;
  readonly size: number;
  #buffer: Buffer;

  constructor(size: number) {
    try {
      this.native = new (addon().Pages)(size);
    } catch (e) {
      throw FabricError.from(e);
    }
    this.size = size;
    this.#buffer = this.native.buffer;
  }

  /** The memory; empty after free(). */
  get buffer(): Buffer {
    return this.#buffer;
  }

  get isFreed(): boolean {
    return this.#buffer.length === 0;
  }

  /** Detaches every view of the pages (they read as empty afterwards). Close their registrations too. */
  free(): void {
    if (this.isFreed) return;
    this.native.free();
    this.#buffer = Buffer.alloc(0);
  }
}

/**
 * Fixed-size chunks sliced from one registered region, handed out from a
 * free list: registration happens once, never per I/O (docs/architecture.md "Memory").
 * When the pool is empty, acquire() waits its turn in FIFO order.
 */
export class Pool {
  readonly mr: MemoryRegion;
  readonly chunkSize: number;
  readonly count: number;
  private readonly free: number[] = [];
  private readonly waiters: { resolve: (s: Slice) => void; reject: (e: Error) => void }[] = [];

  constructor(domain: Domain, opts: { chunkSize: number; count: number; remote?: boolean; endpoint?: Endpoint }) {
    if (!Number.isSafeInteger(opts.chunkSize) || opts.chunkSize <= 0) throw new RangeError('chunkSize must be a positive integer');
    if (!Number.isSafeInteger(opts.count) || opts.count <= 0) throw new RangeError('count must be a positive integer');
    this.chunkSize = opts.chunkSize;
    this.count = opts.count;
    this.mr = domain.register(opts.chunkSize * opts.count, { remote: opts.remote, endpoint: opts.endpoint });
    for (let i = opts.count - 1; i >= 0; i--) this.free.push(i);
  }

  get available(): number {
    return this.free.length;
  }

  /** A chunk now, or null when none is free. */
  tryAcquire(): Slice | null {
    const i = this.free.pop();
    return i === undefined ? null : this.mr.slice(i * this.chunkSize, this.chunkSize);
  }

  /** A chunk, waiting for one to be released if need be; rejects once the pool is closed. */
  acquire(): Promise<Slice> {
    if (this.mr.isClosed) return Promise.reject(new FabricError(9, 'Pool.acquire', 'Pool.acquire: the pool is closed', 'ERR_CLOSED'));
    const s = this.waiters.length === 0 ? this.tryAcquire() : null;
    if (s) return Promise.resolve(s);
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  release(slice: Slice): void {
    if (slice.mr !== this.mr || slice.offset % this.chunkSize !== 0) throw new RangeError('slice does not belong to this pool');
    if (this.mr.isClosed) return;
    const waiter = this.waiters.shift();
    if (waiter) waiter.resolve(this.mr.slice(slice.offset, this.chunkSize));
    else this.free.push(slice.offset / this.chunkSize);
  }

  /** Closes the region; whoever still waits for a chunk is rejected. */
  close(): Promise<void> {
    for (const w of this.waiters.splice(0)) w.reject(new FabricError(9, 'Pool.acquire', 'Pool.acquire: the pool was closed', 'ERR_CLOSED'));
    return this.mr.close();
  }
}

export interface ConnectionRequest {
  readonly privateData: Buffer;
  /** The initiator's address ("10.0.0.5:41234"), or "unknown" when the provider gives none. */
  readonly peer: string;
  /** prepare runs before fi_accept: post receives there. */
  accept(opts?: { privateData?: Buffer; prepare?: (ep: Endpoint) => void; timeoutMs?: number }): Promise<Endpoint>;
  reject(privateData?: Buffer): void;
}

export interface ListenerEvents {
  connection: [ConnectionRequest];
  error: [FabricError];
}

export class Listener extends EventEmitter<ListenerEvents> {
  readonly native: NativeListener;
  readonly port: number;
  readonly address: string;
  /** What an accepted endpoint is opened from: the passive endpoint, or on RDM the listening endpoint. */
  private readonly source: NativeListener | NativeEndpoint;
  private closed = false;

  /** @internal */
  constructor(private readonly domain: Domain, address: string, port: number, private readonly onClose: () => void) {
    super();
    try {
      if (domain.isRdm) {
        // No passive endpoint on RDM: an endpoint at address:port takes the
        // handshake's requests (native/src/core/rdm.cc, docs/transport.md "RDM endpoints").
        const ep = new (addon().Endpoint)(domain.native, null, 0, address, String(port), () => undefined, (ev) => this.onEvent(ev), true);
        this.source = ep;
        this.native = {
          port: ep.port,
          address: ep.address,
          reject: (id: number, pd: Buffer | null) => ep.reject(id, pd),
          close: () => {
            ep.close();
          },
          // Nothing is accepted before a request on RDM: no half-open sockets to reap.
          reapStale: () => 0,
        };
      } else {
        this.native = new (addon().Listener)(domain.native, address, String(port), (ev) => this.onEvent(ev));
        this.source = this.native;
      }
    } catch (e) {
      throw FabricError.from(e);
    }
    this.port = this.native.port;
    this.address = this.native.address;
  }

  /**
   * An RDM listener's wake-ups (its endpoint's, as Endpoint.wakeups): on shm, a
   * connection request rings its doorbell (docs/transport.md "Progress without a
   * wait fd"). Null on MSG, where the passive endpoint sleeps on its EQ.
   */
  get wakeups(): EndpointWakeups | null {
    return 'wakeups' in this.source ? this.source.wakeups() : null;
  }

  private onEvent(ev: NativeCmEvent): void {
    if (ev.type === 'connreq' && ev.requestId !== undefined) {
      const id = ev.requestId;
      let used = false;
      const once = (op: string): void => {
        if (used) throw new FabricError(22, op, `${op}: this connection request was already answered`, 'ERR_ALREADY_ANSWERED');
        used = true;
      };
      const req: ConnectionRequest = {
        privateData: ev.privateData ?? Buffer.alloc(0),
        peer: ev.peer ?? 'unknown',
        accept: async (opts = {}) => {
          once('fi_accept');
          let ep: Endpoint;
          try {
            ep = new Endpoint(this.domain, this.source, id, null, null, () => this.domain.release(ep));
          } catch (e) {
            // Opening failed before the request was consumed (say FI_EMFILE):
            // it is still pending, and the caller can still reject it.
            used = false;
            throw e;
          }
          this.domain.adopt(ep);
          try {
            opts.prepare?.(ep);
            await ep.establish(() => ep.native.accept(opts.privateData ?? null), opts.timeoutMs ?? 10_000);
          } catch (e) {
            if (!ep.isClosed) await ep.close();
            throw e;
          }
          return ep;
        },
        reject: (privateData) => {
          once('fi_reject');
          try {
            this.native.reject(id, privateData ?? null);
          } catch (e) {
            throw FabricError.from(e);
          }
        },
      };
      if (this.listenerCount('connection') === 0) req.reject();
      else this.emit('connection', req);
    } else if (ev.type === 'error') {
      const err = new FabricError(ev.errno ?? 5, 'fi_eq_read', ev.message ? `listener: ${ev.message} (${ev.code})` : undefined);
      if (this.listenerCount('error') > 0) this.emit('error', err);
    }
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /**
   * Shuts down TCP connections accepted on this port that have not sent a
   * connection request within idleMs of being first seen here, so the
   * provider closes them (native/src/core/stale-accepts.h). Call it periodically;
   * returns how many it shut down.
   */
  reapStale(idleMs: number): number {
    if (this.closed) return 0;
    try {
      return this.native.reapStale(idleMs);
    } catch (e) {
      throw FabricError.from(e);
    }
  }

  /** Stops listening; pending requests that were never answered are rejected. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.native.close();
    this.onClose();
  }
}

type OpKind = 'send' | 'recv' | 'read' | 'write' | 'atomic';

interface Op {
  kind: OpKind;
  op: string;
  resolve: (length: number) => void;
  reject: (e: Error) => void;
  mrs: MemoryRegion[];
}

interface RecvOp {
  kind: 'recv';
  slice: Slice;
}

export interface EndpointEvents {
  /** The peer shut the connection down (FI_SHUTDOWN); the endpoint is closed. */
  shutdown: [];
  /** The endpoint closed, for whatever reason. */
  close: [];
  error: [FabricError];
}

/**
 * A connected FI_EP_MSG endpoint. Operations return promises; completions
 * arrive from native in batches (one JS call per batch) and settle them.
 */
export class Endpoint extends EventEmitter<EndpointEvents> {
  readonly native: NativeEndpoint;
  readonly domain: Domain;
  #onReceive: ((slice: Slice, length: number) => void) | null = null;
  /**
   * Receives that completed while no handler was set. The CQ and the EQ are
   * separate queues with separate fds, so a peer's first message can complete
   * a receive posted before fi_accept before FI_CONNECTED is read from the EQ,
   * that is, before the accept resolves and its caller sets onReceive (seen
   * with the sockets provider, which progresses on its own thread). Dropping
   * it lost the login request; it waits here instead, in order.
   */
  readonly #early: { slice: Slice; length: number }[] = [];

  /**
   * Called for every completed receive, with the slice it was posted with and
   * the number of bytes that arrived. The slice is the caller's to re-post.
   * Receives that completed before a handler was set are delivered, in order,
   * as soon as one is.
   */
  get onReceive(): ((slice: Slice, length: number) => void) | null {
    return this.#onReceive;
  }

  set onReceive(fn: ((slice: Slice, length: number) => void) | null) {
    this.#onReceive = fn;
    while (fn !== null && this.#onReceive === fn && this.#early.length > 0) {
      const r = this.#early.shift()!;
      fn(r.slice, r.length);
    }
  }

  /**
   * Called for every remote CQ data a peer's write delivered (write() with
   * remoteData), with its 32 bits, after the write's data is in place. When the
   * provider has FI_RX_CQ_DATA it consumed a posted receive: that slice comes
   * too, the caller's to post again. Data that arrives with no handler set is
   * dropped, as a message with no posted receive would be.
   */
  onRemoteData: ((data: number, consumed: Slice | null) => void) | null = null;

  private readonly ops: (Op | RecvOp | undefined)[] = [];
  private readonly freeIds: number[] = [];
  private readonly backlog: (() => void)[] = [];
  private readonly completions: Uint32Array;
  private state: 'new' | 'connecting' | 'connected' | 'closed' = 'new';
  private connectWaiter: { resolve: (pd: Buffer) => void; reject: (e: Error) => void } | null = null;
  private scratch: Pool | null = null;
  private closing: Promise<void> | null = null;
  private busyPoll = 0;
  /** Private data the peer sent with FI_CONNECTED (the accept's private data, on the connecting side). */
  peerPrivateData: Buffer = Buffer.alloc(0);

  /** @internal */
  constructor(
    domain: Domain,
    listener: NativeListener | NativeEndpoint | null,
    requestId: number,
    node: string | null,
    service: string | null,
    private readonly onClose: () => void,
  ) {
    super();
    this.domain = domain;
    try {
      this.native = new (addon().Endpoint)(
        domain.native,
        listener,
        requestId,
        node,
        service,
        (count) => this.onCompletions(count),
        (ev) => this.onEvent(ev),
      );
    } catch (e) {
      throw FabricError.from(e);
    }
    this.completions = this.native.completions;
  }

  get isClosed(): boolean {
    return this.state === 'closed';
  }

  /**
   * Busy polling: before the event loop sleeps, spin on the completion queue
   * for up to this many microseconds (as SO_BUSY_POLL does for sockets). It
   * buys latency with CPU; 0, the default, waits on the fd alone.
   */
  set busyPollMicros(us: number) {
    if (!Number.isInteger(us) || us < 0 || us > MAX_BUSY_POLL_US) throw new RangeError(`busyPollMicros must be an integer from 0 to ${MAX_BUSY_POLL_US}`);
    this.native.setBusyPoll(us);
    this.busyPoll = us;
  }
  get busyPollMicros(): number {
    return this.busyPoll;
  }

  get info(): ProviderInfo {
    return this.domain.info;
  }

  /**
   * Messages and remote CQ data received so far, whoever consumed them: JS,
   * the target's fast path or the initiator's native queue. Liveness reads it
   * on its timer (docs/architecture.md "What the control plane sees of native work").
   */
  get received(): number {
    return this.native.received();
  }

  /** How often the event loop woke for this endpoint and spun on its CQ: an idle endpoint adds to neither. */
  get wakeups(): EndpointWakeups {
    return this.native.wakeups();
  }

  /**
   * @internal Runs connect or accept, then waits for FI_CONNECTED; a start
   * that returns true is connected already (an RDM accept, native/src/core/rdm.cc).
   */
  establish(start: () => boolean | undefined | void, timeoutMs: number): Promise<void> {
    this.state = 'connecting';
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.connectWaiter = null;
        reject(new FabricError(FI_ETIMEDOUT, 'fi_connect', `connection not established within ${timeoutMs} ms (FI_ETIMEDOUT)`));
      }, timeoutMs);
      this.connectWaiter = {
        resolve: (pd) => {
          clearTimeout(timer);
          this.peerPrivateData = pd;
          this.state = 'connected';
          resolve();
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      };
      try {
        if (start() === true) {
          const w = this.connectWaiter;
          this.connectWaiter = null;
          w?.resolve(Buffer.alloc(0));
        }
      } catch (e) {
        clearTimeout(timer);
        this.connectWaiter = null;
        reject(FabricError.from(e));
      }
    });
  }

  private onEvent(ev: NativeCmEvent): void {
    if (ev.type === 'connected') {
      const w = this.connectWaiter;
      this.connectWaiter = null;
      w?.resolve(ev.privateData ?? Buffer.alloc(0));
      return;
    }
    if (ev.type === 'error') {
      const err = new FabricError(ev.errno ?? 5, 'fi_eq_read', `${ev.message ?? 'connection error'} (${ev.code ?? 'FI_EIO'})`, ev.code);
      (err as FabricError & { privateData?: Buffer }).privateData = ev.privateData;
      const w = this.connectWaiter;
      this.connectWaiter = null;
      if (w) w.reject(err);
      else if (this.listenerCount('error') > 0) this.emit('error', err);
      this.shutdownClose(err.errno, err.code).catch((e: unknown) => this.closeFailed(e));
      return;
    }
    if (ev.type === 'shutdown') {
      const w = this.connectWaiter;
      this.connectWaiter = null;
      w?.reject(new FabricError(FI_ESHUTDOWN, 'fi_connect', 'the peer shut the connection down (FI_ESHUTDOWN)'));
      this.emit('shutdown');
      this.shutdownClose(FI_ESHUTDOWN, 'FI_ESHUTDOWN').catch((e: unknown) => this.closeFailed(e));
    }
  }

  /** A close that nobody awaits failed (an event handler's): report it as an 'error' event, if anyone listens. */
  private closeFailed(e: unknown): void {
    if (this.listenerCount('error') === 0) return;
    this.emit('error', e instanceof FabricError ? e : new FabricError(5, 'fi_close', `closing the endpoint failed: ${e instanceof Error ? e.message : String(e)}`));
  }

  private async shutdownClose(errno: number, code: string): Promise<void> {
    if (this.state === 'closed') return;
    await this.closeWith(errno, code, 'the connection was shut down');
  }

  private onCompletions(count: number): void {
    const c = this.completions;
    for (let i = 0; i < count; i++) {
      const id = c[3 * i];
      const status = c[3 * i + 1];
      const length = c[3 * i + 2];
      if (id === REMOTE_DATA) {
        // (REMOTE_DATA, data, the receive it consumed or REMOTE_DATA): native/src/core/endpoint.cc.
        this.remoteData(status, length);
        continue;
      }
      const op = this.ops[id];
      this.ops[id] = undefined;
      this.freeIds.push(id);
      if (op === undefined) continue;
      if (op.kind === 'recv') {
        const r = op as RecvOp;
        r.slice.mr.unhold(true);
        if (status !== 0) continue;
        if (this.#onReceive !== null) this.#onReceive(r.slice, length);
        else this.#early.push({ slice: r.slice, length });
        continue;
      }
      const o = op as Op;
      for (const mr of o.mrs) mr.unhold();
      if (status === 0) o.resolve(length);
      else o.reject(new FabricError(status, o.op));
    }
    this.runBacklog();
  }

  private remoteData(data: number, consumedId: number): void {
    let consumed: Slice | null = null;
    if (consumedId !== REMOTE_DATA) {
      const op = this.ops[consumedId];
      this.ops[consumedId] = undefined;
      this.freeIds.push(consumedId);
      if (op?.kind === 'recv') {
        consumed = (op as RecvOp).slice;
        consumed.mr.unhold(true);
      }
    }
    this.onRemoteData?.(data, consumed);
  }

  private allocId(op: Op | RecvOp): number {
    const id = this.freeIds.pop() ?? this.ops.length;
    this.ops[id] = op;
    return id;
  }

  private checkOpen(op: string): void {
    if (this.state === 'closed' || this.closing)
      throw new FabricError(9, op, `${op}: the endpoint is closed`, 'ERR_CLOSED');
  }

  /**
   * Posts through native; a full transmit queue (FI_EAGAIN) parks the post in
   * an ordered backlog that drains as completions free room.
   */
  private post(fn: () => void): void {
    if (this.backlog.length > 0) {
      this.backlog.push(fn);
      return;
    }
    try {
      fn();
    } catch (e) {
      if ((e as { errno?: number }).errno === FI_EAGAIN && (e as { code?: string }).code === 'FI_EAGAIN') {
        this.backlog.push(fn);
        setImmediate(() => this.pollNow());
        return;
      }
      throw FabricError.from(e);
    }
  }

  private pollNow(): void {
    if (this.state === 'closed') return;
    this.native.poll();
    this.runBacklog();
    if (this.backlog.length > 0) setImmediate(() => this.pollNow());
  }

  private runBacklog(): void {
    while (this.backlog.length > 0 && this.state !== 'closed') {
      const fn = this.backlog[0];
      try {
        fn();
      } catch (e) {
        if ((e as { code?: string }).code === 'FI_EAGAIN') return;
        this.backlog.shift();
        // The op's own reject is wired inside fn's wrapper (see issue()).
        continue;
      }
      this.backlog.shift();
    }
  }

  /** Registers op, then posts it; post-time errors reject the promise. */
  private issue(kind: OpKind, name: string, mrs: MemoryRegion[], start: (id: number) => void): Promise<number> {
    try {
      this.checkOpen(name);
    } catch (e) {
      return Promise.reject(e);
    }
    return new Promise<number>((resolve, reject) => {
      const op: Op = { kind, op: name, resolve, reject, mrs };
      const id = this.allocId(op);
      for (const mr of mrs) mr.hold();
      const undo = (e: unknown): void => {
        if (this.ops[id] !== op) return;
        this.ops[id] = undefined;
        this.freeIds.push(id);
        for (const mr of mrs) mr.unhold();
        reject(FabricError.from(e));
      };
      const attempt = (): void => {
        if (this.ops[id] !== op) return; // canceled while parked
        try {
          start(id);
        } catch (e) {
          if ((e as { code?: string }).code === 'FI_EAGAIN') throw e;
          undo(e);
        }
      };
      try {
        this.post(attempt);
      } catch (e) {
        undo(e);
      }
    });
  }

  /** Sends the bytes of a registered slice as one message. */
  send(slice: Slice): Promise<number> {
    return this.issue('send', 'fi_send', [slice.mr], (id) => this.native.send(slice.mr.native, slice.offset, slice.length, id));
  }

  /** Sends a small message from any Buffer (fi_inject: copied at once, no completion). */
  sendInline(data: Buffer): void {
    this.checkOpen('fi_inject');
    if (data.length > this.info.injectSize)
      throw new FabricError(90, 'fi_inject', `fi_inject: ${data.length} bytes exceed the provider's inject size of ${this.info.injectSize}`, 'FI_EMSGSIZE');
    // Keep order with sends parked in the backlog.
    const copy = this.backlog.length > 0 ? Buffer.from(data) : data;
    this.post(() => this.native.inject(copy));
  }

  /**
   * Sends a copy of `data` from any Buffer: by fi_inject when it fits, else
   * through a chunk of `slots` (registered memory), waiting for a free chunk
   * when all are in flight. Resolves once the bytes are no longer needed.
   */
  async sendCopy(data: Buffer, slots: Pool): Promise<void> {
    if (data.length <= this.info.injectSize) {
      this.sendInline(data);
      return;
    }
    if (data.length > slots.chunkSize) throw new RangeError(`a ${data.length}-byte message exceeds the ${slots.chunkSize}-byte send slot`);
    const chunk = await slots.acquire();
    try {
      const s = chunk.mr.slice(chunk.offset, data.length);
      data.copy(s.buffer);
      await this.send(s);
    } finally {
      if (!chunk.mr.isClosed) slots.release(chunk);
    }
  }

  /** Posts a receive buffer; onReceive is called when a message lands in it. */
  postReceive(slice: Slice): void {
    this.checkOpen('fi_recv');
    const op: RecvOp = { kind: 'recv', slice };
    const id = this.allocId(op);
    slice.mr.hold(true);
    try {
      this.native.recv(slice.mr.native, slice.offset, slice.length, id);
    } catch (e) {
      this.ops[id] = undefined;
      this.freeIds.push(id);
      slice.mr.unhold(true);
      throw FabricError.from(e);
    }
  }

  private rma(isWrite: boolean, local: Slice | Slice[], remote: DataDescriptor | DataDescriptor[], deliveryComplete: boolean, remoteData?: number): Promise<number> {
    const locals = Array.isArray(local) ? local : [local];
    const remotes = Array.isArray(remote) ? remote : [remote];
    const iov: NativeIov[] = locals.map((s) => [s.mr.native, s.offset, s.length]);
    const riov: NativeRmaIov[] = remotes.map((r) => [r.address, r.length, r.key]);
    const name = isWrite ? 'fi_writemsg' : 'fi_readmsg';
    return this.issue(isWrite ? 'write' : 'read', name, locals.map((s) => s.mr), (id) =>
      this.native.rma(isWrite, iov, riov, id, deliveryComplete, remoteData),
    );
  }

  /** RDMA READ: pulls the remote bytes into the local slice(s). */
  read(local: Slice | Slice[], remote: DataDescriptor | DataDescriptor[]): Promise<number> {
    return this.rma(false, local, remote, false);
  }

  /**
   * RDMA WRITE: pushes the local slice(s) into remote memory. deliveryComplete
   * waits until the data is placed at the target (for providers without
   * FI_ORDER_SAW, before a response may be sent). remoteData (a u32) makes it
   * fi_writedata: the peer's onRemoteData gets it once the data is placed
   * (needs domain.hasRemoteData; FI_EOPNOTSUPP otherwise).
   */
  write(local: Slice | Slice[], remote: DataDescriptor | DataDescriptor[], opts: { deliveryComplete?: boolean; remoteData?: number } = {}): Promise<number> {
    const d = opts.remoteData;
    if (d !== undefined && (!Number.isInteger(d) || d < 0 || d > 0xffffffff)) return Promise.reject(new RangeError('remoteData must be an integer from 0 to 2^32 - 1'));
    return this.rma(true, local, remote, opts.deliveryComplete ?? false, d);
  }

  private async atomic(kind: 'add' | 'cswap', remote: Pick<DataDescriptor, 'address' | 'key'>, operand: bigint, compare: bigint): Promise<bigint> {
    const name = kind === 'add' ? 'fi_fetch_atomic' : 'fi_compare_atomic';
    this.checkOpen(name);
    if (!this.domain.hasAtomics)
      throw new FabricError(95, name, `${name}: atomics are not supported by the ${this.domain.provider} provider (FI_EOPNOTSUPP)`, 'FI_EOPNOTSUPP');
    this.scratch ??= new Pool(this.domain, {
      chunkSize: 24,
      count: 2730,
      endpoint: this.domain.needsEndpointMemory ? this : undefined,
    });
    const scratch = this.scratch;
    const slot = await scratch.acquire();
    try {
      slot.buffer.writeBigUInt64LE(BigInt.asUintN(64, operand), 0);
      slot.buffer.writeBigUInt64LE(BigInt.asUintN(64, compare), 8);
      await this.issue('atomic', name, [slot.mr], (id) => this.native.atomic(kind, slot.mr.native, slot.offset, remote.address, remote.key, id));
      return slot.buffer.readBigUInt64LE(16);
    } finally {
      if (!slot.mr.isClosed) scratch.release(slot);
    }
  }

  /** 64-bit fetch-and-add on remote memory; resolves the value before the add. */
  fetchAdd(remote: Pick<DataDescriptor, 'address' | 'key'>, value: bigint): Promise<bigint> {
    return this.atomic('add', remote, value, 0n);
  }

  /** 64-bit compare-and-swap; resolves the value found (swap happened iff it equals compare). */
  compareSwap(remote: Pick<DataDescriptor, 'address' | 'key'>, compare: bigint, swap: bigint): Promise<bigint> {
    return this.atomic('cswap', remote, swap, compare);
  }

  private closeWith(errno: number, code: string, why: string): Promise<void> {
    if (this.closing) return this.closing;
    this.closing = (async () => {
      const canceled = this.state === 'closed' ? [] : this.native.close();
      this.state = 'closed';
      this.backlog.length = 0;
      const w = this.connectWaiter;
      this.connectWaiter = null;
      w?.reject(new FabricError(errno, 'fi_connect', `connect: ${why} (${code})`, code));
      // Everything still registered never completes now: settle it.
      const ids = new Set<number>(canceled);
      for (let id = 0; id < this.ops.length; id++) if (this.ops[id] !== undefined) ids.add(id);
      for (const id of ids) {
        const op = this.ops[id];
        this.ops[id] = undefined;
        if (op === undefined) continue;
        if (op.kind === 'recv') {
          (op as RecvOp).slice.mr.unhold(true);
          continue;
        }
        const o = op as Op;
        for (const mr of o.mrs) mr.unhold();
        o.reject(new FabricError(errno, o.op, `${o.op}: ${why} (${code})`, code));
      }
      if (this.scratch) await this.scratch.close();
      this.onClose();
      this.emit('close');
    })();
    return this.closing;
  }

  /** Disconnects; every operation still pending rejects with FI_ECANCELED. */
  close(): Promise<void> {
    return this.closeWith(FI_ECANCELED, 'FI_ECANCELED', 'the endpoint was closed');
  }
}
