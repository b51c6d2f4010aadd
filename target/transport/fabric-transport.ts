// The libfabric transport (docs/protocol.md §2): one passive endpoint per
// port, one FI_EP_MSG endpoint per connection. Receive buffers are posted
// before fi_accept; data moves by RMA between the port's local-only data pool
// and the initiator's registered memory.
import type { Reactors } from '../../native/reactors.js';
import {
  connectDataBuffer,
  ConnectKind,
  ConnectRejectReason,
  decodeConnectData,
  ProtocolError,
  PROTOCOL_VERSION,
  TRAIN_VERSION,
  type DataDescriptor,
} from '../../protocol/wire/index.js';
import { Domain, FabricError, Pool, type Endpoint, type Listener, type MemoryRegion, type Slice } from '../../native/fabric.js';
import { FastPath } from '../../native/fast-path.js';
import { errorText } from '../error-text.js';
import { DataPool, type PooledBuffer } from './data-pool.js';
import { fdHeadroom, FD_RESERVE } from './fd-budget.js';
import type { ConnectionFastPath, FastPathStart, PoolUse, PortHandlers, PortOptions, TargetConnection, TargetPort, TargetTransport } from './transport.js';

let nextConnectionId = 1;

/** Capsules the target sends are small (RSP ≤ 284 bytes); larger ones go through a send slot of this size. */
const SEND_SLOT = 1024;
const SEND_SLOTS = 64;
/** The fast path's commands at once on one connection, and the largest it takes (docs/target.md "Fast path"). */
const FAST_SLOTS = 32;

/**
 * Commands without QoS room wait on the fast path itself, up to all its slots
 * (native/src/core/fast-path-qos.cc); RBLK_QOS_PARK=0 in rblkd's environment
 * leaves them to JavaScript instead, as before, for a benchmark's before and
 * after in one run (docs/performance.md "QoS: the unthrottled neighbour").
 */
function qosPark(): { qosPark?: number } {
  const v = process.env.RBLK_QOS_PARK;
  return v !== undefined && /^\d+$/.test(v) ? { qosPark: Number(v) } : {};
}
const FAST_SLOT_SIZE = 128 * 1024;

class FabricConnection implements TargetConnection<PooledBuffer> {
  readonly id = nextConnectionId++;
  readonly version: number;
  readonly remoteData: boolean;
  onClose: ((reason: string) => void) | null = null;
  onLost: (() => void) | null = null;
  private closed = false;
  /** The rest of the receive ring, registered by openReceiveRing. */
  private ringRegion: MemoryRegion | null = null;
  private fast: FastPath | null = null;
  #onCapsule: ((capsule: Buffer) => void) | null = null;

  /**
   * The receive handler goes on the endpoint only once the rblk connection has
   * set this: the initiator may send its login as soon as its side is
   * connected, before this side has read FI_CONNECTED (the sockets provider
   * did so about once in 20 logins), and the endpoint holds receives that
   * complete before it has a handler, in order, with their buffers.
   */
  get onCapsule(): ((capsule: Buffer) => void) | null {
    return this.#onCapsule;
  }

  set onCapsule(fn: ((capsule: Buffer) => void) | null) {
    this.#onCapsule = fn;
    this.ep.onReceive = fn === null ? null : (slice, length) => this.receive(slice, length);
  }

  constructor(
    readonly ep: Endpoint,
    readonly peer: string,
    readonly request: ReturnType<typeof decodeConnectData<typeof ConnectKind.CONNECT>>,
    readonly recvBuffers: number,
    readonly maxCapsule: number,
    /** Receives posted at accept, from recvRegion. */
    private readonly loginBuffers: number,
    private readonly recvRegion: MemoryRegion,
    private readonly sendSlots: Pool,
    private readonly pool: DataPool,
    private readonly rmaIovLimit: number,
    private readonly ordered: boolean,
    hasRemoteData: boolean,
    private readonly reactors: Reactors | null = null,
  ) {
    this.version = request.version ?? 1;
    // Remote data is used only where sends are ordered after writes, so that
    // a later RSP or TSK_RSP cannot overtake it (docs/protocol.md §12.1).
    this.remoteData = hasRemoteData && ordered;
    ep.on('close', () => void this.finish('the connection was shut down'));
  }

  get provider(): string {
    return this.ep.domain.provider;
  }

  get received(): number {
    return this.ep.received;
  }

  private receive(slice: Slice, length: number): void {
    try {
      this.#onCapsule?.(slice.buffer.subarray(0, length));
    } finally {
      // The handler copied what it keeps; the buffer goes back at once. A
      // peer that has just disconnected can make fi_recv fail right here,
      // inside the completion callback: that ends this connection, it must
      // not throw into the event loop (docs/protocol.md §15).
      if (!this.closed && !this.ep.isClosed) {
        try {
          this.ep.postReceive(slice);
        } catch (e) {
          void this.finish(`could not post a receive buffer again: ${errorText(e)}`);
        }
      }
    }
  }

  openReceiveRing(): void {
    const more = this.recvBuffers - this.loginBuffers;
    if (this.ringRegion !== null || more <= 0 || this.closed || this.ep.isClosed) return;
    this.ringRegion = this.ep.domain.register(more * this.maxCapsule);
    for (let i = 0; i < more; i++) this.ep.postReceive(this.ringRegion.slice(i * this.maxCapsule, this.maxCapsule));
  }

  send(capsule: Buffer): Promise<void> {
    return this.ep.sendCopy(capsule, this.sendSlots);
  }

  startFastPath(opts: FastPathStart): ConnectionFastPath | null {
    if (this.fast !== null || this.closed || this.ep.isClosed || !FastPath.available()) return this.fast;
    const slotSize = Math.max(4096, Math.min(FAST_SLOT_SIZE, Math.floor(opts.maxTransfer / 4096) * 4096));
    // Version 5: the initiator may send a burst's CMDs as one train (docs/protocol.md §5.1).
    const trains = this.version >= TRAIN_VERSION;
    this.fast = new FastPath(this.ep, { ...opts, slots: Math.min(FAST_SLOTS, Math.max(1, opts.credits)), slotSize, trains, reactors: this.reactors, ...qosPark() });
    return this.fast;
  }

  allocate(length: number): Promise<PooledBuffer> {
    return this.pool.allocate(length);
  }

  private groups(from: Slice, offset: number, remote: readonly DataDescriptor[]): { local: Slice; remote: DataDescriptor[] }[] {
    // One RMA per group of at most rma_iov_limit remote regions, each against
    // the matching contiguous piece of the local buffer.
    const out: { local: Slice; remote: DataDescriptor[] }[] = [];
    let at = offset;
    for (let i = 0; i < remote.length; i += this.rmaIovLimit) {
      const group = remote.slice(i, i + this.rmaIovLimit);
      const len = group.reduce((n, s) => n + s.length, 0);
      out.push({ local: from.mr.slice(from.offset + at, len), remote: group });
      at += len;
    }
    return out;
  }

  async read(into: PooledBuffer, offset: number, remote: readonly DataDescriptor[]): Promise<void> {
    await Promise.all(this.groups(into.slice, offset, remote).map((g) => this.ep.read(g.local, g.remote)));
  }

  async write(from: PooledBuffer, offset: number, remote: readonly DataDescriptor[], opts: { remoteData?: number } = {}): Promise<void> {
    const groups = this.groups(from.slice, offset, remote);
    const data = opts.remoteData;
    if (data !== undefined) {
      if (!this.remoteData) throw new RangeError('this connection cannot carry remote CQ data');
      // The data is reported when its own write is placed: the earlier
      // groups (more descriptors than one RMA takes) must be placed first.
      const last = groups.pop()!;
      if (groups.length > 0) await Promise.all(groups.map((g) => this.ep.write(g.local, g.remote, { deliveryComplete: true })));
      const w = this.ep.write(last.local, last.remote, { remoteData: data }).then(() => undefined);
      from.busy.push(w);
      w.catch((e: Error) => void this.close(`RDMA WRITE failed: ${e.message}`));
      return;
    }
    const writes = Promise.all(groups.map((g) => this.ep.write(g.local, g.remote, { deliveryComplete: !this.ordered })));
    if (this.ordered) {
      // FI_ORDER_SAW: a send posted after these writes lands after their data
      // (docs/protocol.md §12), so the RSP need not wait for the completions;
      // the buffer goes back to the pool only once they are done. A failed
      // write breaks the connection, so no RSP can overtake bad data.
      from.busy.push(writes);
      writes.catch((e: Error) => void this.close(`RDMA WRITE failed: ${e.message}`));
      return;
    }
    await writes;
  }

  /**
   * Never rejects (its callers do not wait: an endpoint's close event, a
   * failed RDMA WRITE): the session hears of the end in every case, with
   * anything that could not be released added to the reason it logs.
   */
  private async finish(reason: string): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.onLost?.();
    let why = reason;
    try {
      // The fast path first: what is still in its ring or in librbd keeps the slots' own memory (onOrphans).
      await this.fast?.close();
      await this.ep.close();
      await this.recvRegion.close();
      await this.ringRegion?.close();
      await this.sendSlots.close();
    } catch (e) {
      why = `${reason} (releasing the connection's memory failed: ${errorText(e)})`;
    }
    this.onClose?.(why);
  }

  close(reason: string): Promise<void> {
    return this.finish(reason);
  }
}

class FabricPort implements TargetPort {
  private reaper: NodeJS.Timeout | null = null;

  constructor(
    readonly provider: string,
    readonly address: string,
    readonly port: number,
    private readonly domain: Domain,
    private readonly pool: DataPool,
    private readonly listener: Listener,
    private readonly connections: Set<FabricConnection>,
  ) {}

  /**
   * Every quarter of connectTimeoutMs, shuts down accepted TCP connections
   * that have sent no connection request for connectTimeoutMs: the provider
   * would hold them forever (native/src/core/stale-accepts.h).
   */
  startReaping(connectTimeoutMs: number, closed: (count: number) => void): void {
    this.reaper = setInterval(
      () => {
        const n = this.listener.reapStale(connectTimeoutMs);
        if (n > 0) closed(n);
      },
      Math.max(50, Math.floor(connectTimeoutMs / 4)),
    );
    this.reaper.unref();
  }

  poolUse(): PoolUse[] {
    return this.pool.use();
  }

  async stopAccepting(): Promise<void> {
    if (this.reaper) clearInterval(this.reaper);
    this.reaper = null;
    await this.listener.close();
  }

  async close(): Promise<void> {
    await this.stopAccepting();
    for (const c of [...this.connections]) await c.close('the port is closing');
    await this.pool.close();
    await this.domain.close();
  }
}

export class FabricTargetTransport implements TargetTransport {
  readonly name = 'fabric' as const;

  async listen(opts: PortOptions, handlers: PortHandlers): Promise<TargetPort> {
    const reactors = opts.reactors ?? null;
    const domain = Domain.open({ provider: opts.provider, address: opts.address === '0.0.0.0' ? undefined : opts.address, threadSafe: reactors !== null });
    const pool = new DataPool(domain, { maxIo: opts.maxIo, dataBuffers: opts.dataBuffers });
    const listener = domain.listen({ address: opts.address, port: opts.port });
    const rmaIovLimit = Math.max(1, Math.min(16, domain.info.rmaIovLimit, domain.info.iovLimit));
    const connections = new Set<FabricConnection>();
    const highest = opts.protocolVersion ?? PROTOCOL_VERSION;
    const reject = (req: { reject(pd?: Buffer): void }, reason: ConnectRejectReason): void =>
      req.reject(connectDataBuffer({ kind: ConnectKind.REJECT, version: highest, reason }));

    listener.on('connection', (req) => {
      let request;
      try {
        request = decodeConnectData(req.privateData, ConnectKind.CONNECT);
      } catch (e) {
        const why = e instanceof ProtocolError && e.reason === 'BAD_VERSION' ? ConnectRejectReason.UNSUPPORTED_VERSION : ConnectRejectReason.BAD_PRIVATE_DATA;
        reject(req, why);
        return;
      }
      // §3: a version above the highest spoken is refused, naming that one.
      if ((request.version ?? 1) > highest) {
        reject(req, ConnectRejectReason.UNSUPPORTED_VERSION);
        return;
      }
      const peer = req.peer;
      const decision = handlers.admit(request, peer);
      if ('reject' in decision) {
        reject(req, decision.reject);
        return;
      }
      // Out of fds (EMFILE) must not be reached: see fd-budget.ts.
      const headroom = fdHeadroom();
      if (headroom < FD_RESERVE) {
        reject(req, ConnectRejectReason.NO_RESOURCES);
        handlers.acceptFailed?.(new FabricError(24, 'fi_accept', `only ${headroom} file descriptors left, ${FD_RESERVE} are kept in reserve (FI_EMFILE)`, 'FI_EMFILE'));
        return;
      }
      const { recvBuffers, maxCapsule } = decision.accept;
      const loginBuffers = Math.max(1, Math.min(recvBuffers, decision.accept.loginBuffers ?? recvBuffers));
      let recvRegion: MemoryRegion;
      let sendSlots: Pool;
      try {
        recvRegion = domain.register(loginBuffers * maxCapsule);
      } catch {
        handlers.acceptAbandoned?.(request);
        reject(req, ConnectRejectReason.NO_RESOURCES);
        return;
      }
      try {
        sendSlots = new Pool(domain, { chunkSize: SEND_SLOT, count: SEND_SLOTS });
      } catch {
        void recvRegion.close().catch(() => undefined);
        handlers.acceptAbandoned?.(request);
        reject(req, ConnectRejectReason.NO_RESOURCES);
        return;
      }
      req
        .accept({
          privateData: connectDataBuffer({ kind: ConnectKind.ACCEPT, version: request.version, maxCapsule, recvBuffers }),
          prepare: (ep) => {
            for (let i = 0; i < loginBuffers; i++) ep.postReceive(recvRegion.slice(i * maxCapsule, maxCapsule));
          },
        })
        .then(
          (ep) => {
            const spin = opts.busyPollMicros?.() ?? 0;
            if (spin > 0) ep.busyPollMicros = spin;
            const conn = new FabricConnection(ep, peer, request, recvBuffers, maxCapsule, loginBuffers, recvRegion, sendSlots, pool, rmaIovLimit, domain.ordersSendAfterWrite, domain.hasRemoteData, reactors);
            connections.add(conn);
            ep.once('close', () => connections.delete(conn));
            try {
              handlers.connected(conn);
            } catch (e) {
              // Nothing took the connection: it cannot be served, so it ends
              // here rather than as a rejection nobody handles.
              void conn.close(`the connection could not be set up: ${errorText(e)}`);
            }
          },
          (e: unknown) => {
            // Give the buffers back whatever happened, and the pre-login slot.
            void recvRegion.close().catch(() => undefined);
            void sendSlots.close().catch(() => undefined);
            handlers.acceptAbandoned?.(request);
            const err = e instanceof Error ? e : new Error(String(e));
            // The peer went away during the accept, or closed it: nothing to report.
            if (err instanceof FabricError && (err.code === 'FI_ESHUTDOWN' || err.code === 'FI_ECONNREFUSED' || err.code === 'FI_ECANCELED')) return;
            // The endpoint could not be opened (FI_EMFILE, FI_ENOMEM...): the
            // request is still pending, so the initiator hears "no resources"
            // (docs/protocol.md §3, REJECT reason 3) instead of waiting for a timeout.
            try {
              reject(req, ConnectRejectReason.NO_RESOURCES);
            } catch {
              // Already consumed by the endpoint, whose close told the peer.
            }
            handlers.acceptFailed?.(err);
          },
        );
    });
    // An error on the listener's event queue (the provider failed to take a
    // connection, say) is logged too; the listener keeps listening.
    listener.on('error', (e) => handlers.acceptFailed?.(e));

    const port = new FabricPort(domain.provider, listener.address, listener.port, domain, pool, listener, connections);
    if (opts.connectTimeoutMs !== undefined) port.startReaping(opts.connectTimeoutMs, (n) => handlers.staleClosed?.(n));
    return port;
  }
}

