// The seam between the rblk front end (target/rblk/) and the fabric: a transport accepts
// connections, moves capsules, and moves data between target-local
// registered memory and the initiator's memory (RDMA READ for a write, RDMA
// WRITE for a read). It knows nothing of SCSI or of the capsules' contents
// (docs/architecture.md "Seams").
import type { Reactors } from '../../native/reactors.js';
import type { FastPathLun, FastPathStats } from '../../native/fast-path.js';
import type { ConnectRejectReason, ConnectRequestData, DataDescriptor } from '../../protocol/wire/index.js';

/** Target-local registered memory holding one command's data. */
export interface DataBuffer {
  /** Exactly the bytes asked for; page-aligned, so O_DIRECT backends can use it. */
  readonly buffer: Buffer;
  release(): void;
}

/** A LUN's eligibility record for a connection's fast path (docs/target.md "Fast path"); its fields are the addon's. */
export type { FastPathLun, FastPathStats } from '../../native/fast-path.js';

/**
 * A connection's native fast path: READ and WRITE taken from the receive to
 * the response below JavaScript, for LUNs with a published record. The
 * session publishes and revokes records and accounts for what runs there.
 */
export interface ConnectionFastPath {
  setLun(lun: number, record: FastPathLun): void;
  revoke(lun: number): void;
  /** The connection is closing: commands parked for their QoS turn end unrun; returns how many. */
  dropParked(): number;
  inFlight(lun?: number): number;
  idle(lun: number): Promise<void>;
  hasTag(tag: bigint): boolean;
  setCounters(sessionOutstanding: number, credits: number): void;
  /** GOOD answers on the LUN since the last call (native/fast-path.ts takeCounts), so the session can count them where the request core counts. */
  takeCounts(lun: number, out: Float64Array): number;
  readonly stats: FastPathStats;
  /** A command given back: an I/O error ('read', 'write') the session answers, or a failed transfer that ends it. */
  onFailed: ((tag: bigint, lun: number, kind: 'read' | 'write' | 'transfer', errno: number, length: number) => void) | null;
  /**
   * Called as the fast path closes when backend requests of it outlive the
   * close (the ring's on a slow device, librbd's when a cluster does not answer yet), with a promise that
   * resolves once they have all ended; the session fences their volumes until
   * then (docs/target.md "A lost connection's commands").
   */
  onOrphans: ((settled: Promise<void>) => void) | null;
  close(): Promise<void>;
}

export interface FastPathStart {
  credits: number;
  /** The negotiated largest initiator capsule, data length and immediate data. */
  maxCapsule: number;
  maxTransfer: number;
  maxImmediate: number;
  /**
   * Answer a GOOD read without residual by its data write's remote CQ data,
   * with no RSP (version 2 where the connection carries it, docs/protocol.md §12.1).
   */
  remoteData?: boolean;
  /** Upper bounds of the latency histogram's buckets, seconds (target/scsi/request/io-stats.ts). */
  latencyBuckets?: readonly number[];
}

/**
 * One connection. B is the transport's own buffer type, so that what
 * allocate() handed out comes back to read() and write() as itself.
 */
export interface TargetConnection<B extends DataBuffer = DataBuffer> {
  /** Unique per process, for logs. */
  readonly id: number;
  /** Where the initiator connected from ("127.0.0.1:41234", "loop:name"). */
  readonly peer: string;
  readonly provider: string;
  /** What the initiator asked for in its connect private data. */
  readonly request: ConnectRequestData;
  /** The connection's protocol version: the CONNECT's, which the ACCEPT echoed (docs/protocol.md §3). */
  readonly version: number;
  /**
   * write() can carry remote CQ data (fi_writedata), reported at the
   * initiator once the data is placed and ordered before any later send
   * (docs/protocol.md §12.1, docs/transport.md "Remote CQ data").
   */
  readonly remoteData: boolean;
  /** Receive buffers posted: what the initiator may have outstanding, plus control buffers. */
  readonly recvBuffers: number;
  /** Size of each posted receive buffer: the largest capsule this connection takes. */
  readonly maxCapsule: number;
  /**
   * Posts the whole receive ring (recvBuffers). Until then only the admit
   * decision's loginBuffers are posted, so a connection that never logs in
   * holds a login's worth of memory, not a session's (docs/operations.md,
   * "Connection limits"). Call it before sending LOGIN_RSP: the initiator
   * may send commands as soon as it has that. Throws when the memory cannot
   * be registered.
   */
  openReceiveRing(): void;
  /**
   * Called once per received capsule with exactly its bytes. The view is only
   * valid until the handler returns: its receive buffer is posted again then.
   */
  onCapsule: ((capsule: Buffer) => void) | null;
  /** Called once when the connection ends, whoever ended it. */
  onClose: ((reason: string) => void) | null;
  /**
   * Capsules received so far, including those the native fast path served
   * without onCapsule: what the connection's liveness clock reads
   * (docs/architecture.md "What the control plane sees of native work").
   */
  readonly received: number;
  /**
   * Called once, synchronously, the moment the transport learns the connection
   * is gone, before it releases anything (onClose may come turns later): the
   * session fences what of it is still in a backend before other connections'
   * commands run again. A transport whose onClose comes at once need not call it.
   */
  onLost?: (() => void) | null;
  /** Sends one capsule (the bytes are copied before it resolves, or before it returns). */
  send(capsule: Buffer): Promise<void>;
  /** Registered memory for one command's data; waits its turn when the pool is busy. */
  allocate(length: number): Promise<B>;
  /** RDMA READ: fills into.buffer from `offset` on with the remote regions, in order. */
  read(into: B, offset: number, remote: readonly DataDescriptor[]): Promise<void>;
  /**
   * RDMA WRITE of into.buffer from `offset` on across the remote regions, as
   * many bytes as they hold. When it resolves, a later send() is guaranteed
   * to arrive after the data is placed (FI_ORDER_SAW, or delivery-complete
   * where the provider lacks it). With remoteData (only where this.remoteData),
   * the last byte's write carries those 32 bits to the initiator's CQ.
   */
  write(from: B, offset: number, remote: readonly DataDescriptor[], opts?: { remoteData?: number }): Promise<void>;
  close(reason: string): Promise<void>;
  /**
   * Starts the native fast path on this connection, after login; absent or
   * null where the transport has none (the loop transport, a host without
   * io_uring). It closes with the connection.
   */
  startFastPath?(opts: FastPathStart): ConnectionFastPath | null;
}

export type AdmitDecision =
  | {
      accept: {
        recvBuffers: number;
        maxCapsule: number;
        /** Receive buffers posted at accept, before openReceiveRing (1 to recvBuffers); all of them when absent. */
        loginBuffers?: number;
      };
    }
  | { reject: ConnectRejectReason };

export interface PortHandlers {
  /** Decides on a connection request from its private data, before accepting. */
  admit(request: ConnectRequestData, peer: string): AdmitDecision;
  connected<B extends DataBuffer>(conn: TargetConnection<B>): void;
  /**
   * The transport could not take a connection itself (out of fds, out of
   * memory): the peer was refused, the port and its sessions carry on. For
   * the log: nothing else would tell the operator.
   */
  acceptFailed?(error: Error): void;
  /** An admitted request that never became a connection (the initiator went away, or the accept failed). */
  acceptAbandoned?(request: ConnectRequestData): void;
  /** Accepted sockets that sent no connection request within connectTimeoutMs were shut down. */
  staleClosed?(count: number): void;
}

/** One size class of a port's data pool. */
export interface PoolUse {
  readonly chunkSize: number;
  readonly chunks: number;
  readonly inUse: number;
}

export interface TargetPort {
  readonly provider: string;
  readonly address: string;
  readonly port: number;
  /** The data pool's use, when the transport has one (the loop transport has none). */
  poolUse?(): PoolUse[];
  /** Stops accepting; established connections stay (the start of a drain). */
  stopAccepting(): Promise<void>;
  /** Stops accepting, closes every connection, releases the port's memory. */
  close(): Promise<void>;
}

export interface PortOptions {
  provider: string;
  address: string;
  port: number;
  /** Largest data transfer of one command (bytes): sizes the data pool's chunks. */
  maxIo: number;
  /** Chunks in the data pool: how many commands can hold data at once. */
  dataBuffers: number;
  /**
   * The highest protocol version to speak (MIN_PROTOCOL_VERSION to
   * PROTOCOL_VERSION; default PROTOCOL_VERSION). A CONNECT asking for more
   * is refused with REJECT reason 1 naming this one (docs/protocol.md §3).
   */
  protocolVersion?: number;
  /**
   * How long an accepted TCP connection may wait before sending its fabric
   * connection request; longer and it is shut down. Absent: no limit.
   */
  connectTimeoutMs?: number;
  /**
   * Reactor threads for the connections' fast paths (native/reactors.ts); the
   * domain is then opened FI_THREAD_SAFE. Null or absent: the JS thread.
   */
  reactors?: Reactors | null;
  /**
   * The busy poll each accepted connection's endpoint gets, in µs, asked at
   * its accept (so a reload's value reaches the connections after it).
   * Absent, or 0: none.
   */
  busyPollMicros?: () => number;
}

export interface TargetTransport {
  readonly name: 'fabric' | 'loop';
  listen(opts: PortOptions, handlers: PortHandlers): Promise<TargetPort>;
}
