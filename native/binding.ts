// The only file that loads the native addons. rblk's native code is five
// .node files: rblk_native.node (libfabric and file operations, required) and
// one each for io_uring, libfuse3, libsystemd and librbd, which are optional at build
// time and at run time (docs/architecture.md "Loading the addon"). Each is
// loaded on first use, so importing rblk loads nothing, and a missing optional
// part fails only the feature that needs it, with an error naming the Debian
// package to install. Everything here is a typed view of what native/src/*.cc
// exports; the promise-based API that the rest of rblk uses lives in fabric.ts,
// io-ring.ts and fuse.ts.
// Over 600 lines by design: this is the one file that loads a .node
// (docs/architecture.md "Loading the addon"), so every native class's typed
// declaration is here, one after another.
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { constants } from 'node:os';
import { dirname, isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** What fi_getinfo told us about the provider a Domain was opened on. */
export interface ProviderInfo {
  provider: string;
  fabric: string;
  domain: string;
  /**
   * fi_domain_attr.mr_mode bits the provider requires (FI_MR_LOCAL, ...); the
   * legacy FI_MR_BASIC is reported as FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY.
   */
  mrMode: number;
  /** The libfabric API version fi_getinfo was called with ("1.17", or "1.4" for mrMode 'basic'). */
  apiVersion: string;
  /** fi_tx_attr.msg_order bits (FI_ORDER_SAW, ...). */
  msgOrder: number;
  /** True when the provider has FI_ATOMIC on this endpoint type. */
  atomics: boolean;
  maxMsgSize: number;
  injectSize: number;
  /** fi_tx_attr.iov_limit and rma_iov_limit. */
  iovLimit: number;
  rmaIovLimit: number;
  txSize: number;
  rxSize: number;
  /** Largest private data on connect/accept/reject (FI_OPT_CM_DATA_SIZE). */
  cmDataSize: number;
  /** 'msg' (FI_EP_MSG, connections) or 'rdm' (FI_EP_RDM, an address vector; docs/transport.md "RDM endpoints"). */
  endpointType: EndpointType;
  /** fi_domain_attr.mr_key_size, in bytes. */
  mrKeySize: number;
  /** fi_domain_attr.cq_data_size: bytes of remote CQ data a write may carry (0: none; always 0 under rxm, docs/transport.md "Remote CQ data"). */
  cqDataSize: number;
  /** The provider's FI_RX_CQ_DATA mode: remote CQ data consumes a posted receive. */
  rxCqData: boolean;
}

/** Constants re-exported from rdma/fabric.h so TS never hard-codes them. */
export interface NativeConstants {
  FI_MR_LOCAL: number;
  FI_MR_VIRT_ADDR: number;
  FI_MR_ALLOCATED: number;
  FI_MR_PROV_KEY: number;
  FI_MR_ENDPOINT: number;
  FI_ORDER_SAW: number;
  FI_ORDER_RAW: number;
  FI_ORDER_WAW: number;
  FI_ORDER_SAS: number;
}

export interface NativeDomain {
  readonly info: ProviderInfo;
  close(): void;
}

/** What mr_mode a Domain asks for (docs/transport.md "Memory-registration modes"). */
export type MrModeRequest = 'default' | 'basic';

/** The libfabric endpoint type a domain opens: FI_EP_MSG or FI_EP_RDM. */
export type EndpointType = 'msg' | 'rdm';

export interface NativeDomainCtor {
  new (
    provider: string,
    node: string | null,
    service: string | null,
    source: boolean,
    mrMode: MrModeRequest,
    threadSafe?: boolean,
    endpointType?: EndpointType,
  ): NativeDomain;
}

export interface NativeMemoryRegion {
  /** A view over the registered memory; detached (length 0) after close(). */
  readonly buffer: Buffer;
  readonly key: bigint;
  /** The remote address of byte 0: the virtual address under FI_MR_VIRT_ADDR, else 0. */
  readonly remoteBase: bigint;
  readonly size: number;
  close(): void;
}

export interface NativeMemoryRegionCtor {
  /**
   * remoteAccess adds FI_REMOTE_READ | FI_REMOTE_WRITE; endpoint binds under FI_MR_ENDPOINT.
   * Given Pages instead of a size, registers those: the region then has no view of
   * its own (buffer is empty) and its close leaves the pages' view alone.
   */
  new (domain: NativeDomain, memory: number | NativePages, remoteAccess: boolean, endpoint: NativeEndpoint | null): NativeMemoryRegion;
}

/** Page-aligned memory of no domain, registered on as many as need it (native/src/core/memory-region.h). */
export interface NativePages {
  /** The pages; detached (length 0) after free(). */
  readonly buffer: Buffer;
  free(): void;
}

export interface NativePagesCtor {
  new (size: number): NativePages;
}

/** One connection-manager event from an event queue. */
export interface NativeCmEvent {
  type: 'connreq' | 'connected' | 'shutdown' | 'error';
  /** For connreq: an id to hand to accept() or reject(). */
  requestId?: number;
  /** For connreq: where it came from ("10.0.0.5:41234"), when the provider says (fi_info dest_addr). */
  peer?: string;
  privateData?: Buffer;
  errno?: number;
  code?: string;
  message?: string;
}

export interface NativeListener {
  readonly port: number;
  readonly address: string;
  reject(requestId: number, privateData: Buffer | null): void;
  /** Shuts down accepted sockets that sent no CM request within idleMs; returns how many (stale-accepts.h). */
  reapStale(idleMs: number): number;
  close(): void;
}

export interface NativeListenerCtor {
  new (domain: NativeDomain, node: string, service: string, onEvent: (ev: NativeCmEvent) => void): NativeListener;
}

/** A local piece of registered memory: [region, offset, length]. */
export type NativeIov = [NativeMemoryRegion, number, number];
/** A DataDescriptor as the addon takes it: a tuple in fi_rma_iov's order [address, length, key], built by native/fabric.ts; an encoding, not a second descriptor type. */
export type NativeRmaIov = [bigint, number, bigint];

/** An idle endpoint adds to neither count. */
export interface EndpointWakeups {
  wakeups: number;
  spins: number;
  /** shm: how often this endpoint rang its peer's doorbell (docs/transport.md "Progress without a wait fd"). */
  rings: number;
}

export interface NativeEndpoint {
  /**
   * Completions arrive in batches: onCompletions(count) is called once per
   * batch, with completions.subarray(0, 3*count) holding (context, status, length)
   * triples. status is 0 or a positive libfabric errno.
   */
  readonly completions: Uint32Array;
  /** fi_connect to the address given at construction. */
  connect(node: string, service: string, privateData: Buffer | null): void;
  /**
   * fi_accept, for an endpoint made from a listener's connection request. On
   * an RDM endpoint it returns true: connected at once, no event follows.
   */
  accept(privateData: Buffer | null): boolean | undefined;
  /** A listening RDM endpoint's: answers a connection request with a reject. */
  reject(requestId: number, privateData: Buffer | null): void;
  /** A listening RDM endpoint's port and address (0 and '' otherwise). */
  readonly port: number;
  readonly address: string;
  /** Posts a send from registered memory; context is reported on completion. */
  send(mr: NativeMemoryRegion, offset: number, length: number, context: number): void;
  /** fi_inject: no completion; the bytes are copied before it returns. */
  inject(data: Buffer): void;
  recv(mr: NativeMemoryRegion, offset: number, length: number, context: number): void;
  /** RMA read (isWrite false) or write; deliveryComplete asks for FI_DELIVERY_COMPLETE. */
  /** remoteData: fi_writedata's 32 bits of remote CQ data (writes only). */
  rma(isWrite: boolean, local: NativeIov[], remote: NativeRmaIov[], context: number, deliveryComplete: boolean, remoteData?: number): void;
  /** 64-bit atomics: op 'add' (fetch-add) or 'cswap'; operand and compare live in scratch, result lands there. */
  atomic(op: 'add' | 'cswap', scratch: NativeMemoryRegion, offset: number, address: bigint, key: bigint, context: number): void;
  /** Drains the CQ now (used when the caller needs progress without waiting for the fd). */
  poll(): void;
  /** Spin on the CQ for up to this many µs before sleeping on the fd (0: off, the default). */
  setBusyPoll(microseconds: number): void;
  /**
   * Messages and remote CQ data received so far, whichever consumer took them
   * (JS, the fast path, the initiator queue): the liveness clock's reading
   * (docs/architecture.md "What the control plane sees of native work").
   */
  received(): number;
  /** How often the JS thread woke for this endpoint, and how often it spun before sleeping (native/src/core/endpoint.h). */
  wakeups(): EndpointWakeups;
  /** fi_shutdown + close of ep, cq, eq; returns the contexts of operations that never completed. */
  close(): number[];
}

export interface NativeEndpointCtor {
  /**
   * From a listener's connreq (listener + requestId) or for an active connect
   * (listener null). On an RDM domain the listener is a listening endpoint,
   * one made with listen true (native/src/core/rdm.cc).
   */
  new (
    domain: NativeDomain,
    listener: NativeListener | NativeEndpoint | null,
    requestId: number,
    node: string | null,
    service: string | null,
    onCompletions: (count: number) => void,
    onEvent: (ev: NativeCmEvent) => void,
    listen?: boolean,
  ): NativeEndpoint;
}

/** What the one-file FUSE filesystem shows (native/src/fuse/fuse-session.h). */
export interface NativeFuseOptions {
  fileName: string;
  size: number;
  blockSize: number;
  readOnly: boolean;
  /** The mount's source in /proc/mounts; its type is fuse.rblk. */
  fsName: string;
  allowOther: boolean;
  /** Entry and attribute cache validity, seconds. */
  timeout: number;
}

/**
 * A request JS must answer with reply(id, ...): read (answer a Buffer), write
 * (data is the payload; flags the open flags, answer the byte count), fsync
 * (flags: datasync), fallocate (flags: the fallocate mode). 'end' (id 0) says
 * the kernel ended the session; flags is 0 or the errno that ended it.
 */
export type NativeFuseOp = 'read' | 'write' | 'fsync' | 'fallocate' | 'end';

export interface NativeFuseSession {
  readonly mountpoint: string;
  /** Requests handed to JS and not yet answered. */
  readonly pending: number;
  /** errno 0: success with result; else fails the request. False if no longer pending. */
  reply(id: number, errno: number, result: Buffer | number | null): boolean;
  /** Unmounts (fuse_session_unmount: the device fd is closed, the mount detached) and frees the session. */
  close(): void;
}

export interface NativeFuseSessionCtor {
  /** Mounts at dir at once; the session is served on the libuv loop. */
  new (
    dir: string,
    opts: NativeFuseOptions,
    onRequest: (op: NativeFuseOp, id: number, offset: number, length: number, data: Buffer | null, flags: number) => void,
  ): NativeFuseSession;
}

/** An io_uring (native/src/uring/io-ring.cc); native/io-ring.ts is its only user. */
export interface NativeIoRing {
  /** (token, result) pairs of the batch being delivered; result is bytes or -errno. */
  readonly completions: Int32Array;
  readonly features: { entries: number; singleIssuer: boolean };
  read(fd: number, buffer: Uint8Array, offset: number, token: number): void;
  write(fd: number, buffer: Uint8Array, offset: number, token: number, dsync: boolean): void;
  fsync(fd: number, token: number, datasync: boolean): void;
  close(): void;
}

export interface NativeIoRingCtor {
  new (entries: number, onCompletions: (count: number) => void): NativeIoRing;
}

/** A LUN's eligibility record for the fast path (native/src/core/fast-path.h). */
export interface NativeFastLun {
  fd: number;
  blockSize: number;
  /** Capacity in blocks. */
  blocks: number;
  /** Largest transfer in blocks (the LU's limit and the session's max_io). */
  maxBlocks: number;
  /** O_DIRECT alignment in bytes (1 when buffered). */
  align: number;
  readable: boolean;
  writable: boolean;
  /** WCE 0: every write durable before GOOD. */
  writeThrough: boolean;
  /** An RBD volume (fd unused): rblk_rbd's table and the open image (native/src/common/rbd-c-api.h). */
  rbdApi?: NativeRbdApi;
  rbdImage?: NativeRbdHandle;
  /** QoS buckets the fast path charges before it takes a command (target/scsi/qos-bucket.ts for the layout; native/src/core/qos-bucket.h). */
  qos?: readonly BigInt64Array[];
}

export interface NativeFastPathOptions {
  slots: number;
  slotSize: number;
  maxCapsule: number;
  maxTransfer: number;
  maxImmediate: number;
  /** FI_ORDER_SAW: the RSP may follow the RDMA WRITE without waiting for its delivery. */
  ordered: boolean;
  credits: number;
  /**
   * Version 2 (docs/protocol.md §12.1): answer a GOOD read by its data write's
   * remote CQ data, with no RSP. Taken only together with ordered.
   */
  remoteData?: boolean;
  /** Version 5 (docs/protocol.md §5.1): a received message may be a train of CMDs, taken one by one. */
  trains?: boolean;
  /** Upper bounds of the latency histogram's buckets, seconds, ascending (takeCounts). */
  latencyBuckets?: readonly number[];
  /** Moves the connection's data path to the least loaded of these reactor threads (native/src/core/reactor.h). */
  reactors?: NativeReactors;
  /** How many commands may wait natively for their QoS turn at once (default: slots; 0: none, JS waits; native/src/core/fast-path-qos.cc). */
  qosPark?: number;
  /** Cork the socket for a burst of answers on libfabric's tcp provider (default true; docs/transport.md "Corked bursts"). */
  cork?: boolean;
}

/** Reactor threads (native/src/core/reactor.h); native/reactors.ts is its only user. */
export interface NativeReactors {
  readonly size: number;
  /** Per reactor: connections attached now, and epoll wake-ups so far. */
  readonly stats: { connections: number; wakeups: number }[];
  close(): void;
}

export interface NativeReactorsCtor {
  new (count: number): NativeReactors;
}

/** What one connection's fast path has done: commands taken and handed off, running now, and reads answered by remote CQ data (§12.1). */
export interface NativeFastPathStats {
  taken: number;
  handedOff: number;
  inFlight: number;
  answeredByData: number;
  /** Backend I/O that finished inside its own submission (a buffered read the page cache held) and was answered in that wake-up. */
  ioInline: number;
  /** Trains (docs/protocol.md §5.1) whose every CMD the fast path took; one it took only the front of went on to JavaScript and is not counted. */
  trains: number;
  /** Commands left to JavaScript because a QoS bucket had no room for them yet and the parked ones were at their bound (JS waits for their turn). */
  qosDeferred: number;
  /** Commands that waited natively for their QoS turn (parked), those of them started since, and those waiting now (native/src/core/fast-path-qos.cc). */
  qosParked: number;
  qosReleased: number;
  qosWaiting: number;
  /** The reactor thread serving the connection, or -1: the JS thread. */
  reactor: number;
  /** Bursts of answers sent corked, and uncorks (equal between bursts; docs/transport.md "Corked bursts"). */
  corked: number;
  uncorked: number;
}

/** The target's native fast path, one per connection (native/src/core/fast-path.h); native/fast-path.ts is its only user. */
export interface NativeFastPath {
  setLun(lun: number, record: NativeFastLun): void;
  /** From this call on no command of the LUN starts natively; the LUN's commands parked for their QoS turn start now. */
  revoke(lun: number): void;
  /** Commands parked for their QoS turn end unrun, their slots back (the connection is closing); returns how many. */
  dropParked(): number;
  /** Without a LUN: the commands holding a credit (not yet answered); with one: all still running there. */
  inFlight(lun?: number, watch?: boolean): number;
  hasTag(tag: bigint): boolean;
  setCounters(jsOutstanding: number, credits: number): void;
  /** GOOD answers on the LUN since the last call, then zeroed (native/src/core/fast-path.cc TakeCounts for the layout); returns the ops. */
  takeCounts(lun: number, out: Float64Array): number;
  readonly stats: NativeFastPathStats;
  /**
   * Frees everything; returns how many backend requests (the ring's and
   * librbd's) outlive the close (they keep the slots' pages), and calls
   * onSettled once they have all ended (only when there are any).
   */
  close(onSettled?: () => void): number;
}

/** Opaque: rblk_rbd's C function table (native/src/common/rbd-c-api.h). */
export type NativeRbdApi = { readonly __rbdApi: unique symbol };
/** Opaque: one open image's librbd handle (RbdImage.fastHandle), valid until the image's close. */
export type NativeRbdHandle = { readonly __rbdHandle: unique symbol };

/** Opaque: rblk_uring's C function table (native/src/common/uring-c-api.h). */
export type NativeUringApi = { readonly __uringApi: unique symbol };

export interface NativeFastPathCtor {
  new (
    endpoint: NativeEndpoint,
    region: NativeMemoryRegion,
    uringApi: NativeUringApi,
    options: NativeFastPathOptions,
    onFailed: (tag: bigint, lun: number, kind: 'read' | 'write' | 'transfer', errno: number, length: number) => void,
    onIdle: (lun: number) => void,
  ): NativeFastPath;
}

export interface NativeInitiatorQueueOptions {
  /** Commands at once (each holds one slot and one slotSize-byte send slot of the region). */
  slots: number;
  /** Send memory per slot: at least a CMD with one descriptor, and with `immediate` bytes of data. */
  slotSize: number;
  /** WRITEs up to this many bytes from a remote-access region go as immediate data (0: none). */
  immediate: number;
  /** Bytes kept per completion for an answer JS decodes (the receive size). */
  answerSize: number;
  /** The credits the connection holds now (the queue and JS share the cell from then on). */
  credits: number;
  /** Credits kept back for task management (docs/protocol.md §11). */
  reserve: number;
  /** Version 2: a READ may be answered by remote CQ data (§12.1). */
  remoteData: boolean;
  /** Version 5: the largest message of several CMDs (§5.1), at most slotSize; 0 or absent: one CMD per message. */
  train?: number;
  /** Cork the socket while a submit posts several messages, on libfabric's tcp provider (default true; docs/transport.md "Corked bursts"). */
  cork?: boolean;
}

/**
 * The initiator's native command queue, one per connection
 * (native/src/core/initiator-queue.h); native/initiator-queue.ts is its only user.
 */
export interface NativeInitiatorQueue {
  /** 12 words per entry: lun, lba hi, lba lo, blocks, flags (1 write, 2 FUA), address hi, lo, key hi, lo, length; word 10 gets the slot. */
  readonly submissions: Uint32Array;
  /** (slot, result, length) per completion: result 0 GOOD, 1 an answer in `answers`, 2 the send failed (errno). */
  readonly completions: Uint32Array;
  /** The answers of completions with result 1, answerSize bytes per completion index. */
  readonly answers: Buffer;
  /** The connection's credit count, shared by the queue and JS. */
  readonly credits: Int32Array;
  readonly outstanding: number;
  /** WRITEs sent with their data in the CMD (immediate data) since the queue opened. */
  readonly immediateWrites: number;
  /** Messages that carried more than one CMD (trains, docs/protocol.md §5.1) since the queue opened. */
  readonly trains: number;
  /** Submits whose messages went out corked as one transmit (docs/transport.md "Corked bursts") since the queue opened. */
  readonly corked: number;
  /** Posts the first `count` submissions; returns how many went out. */
  submit(count: number): number;
  close(): void;
}

export interface NativeInitiatorQueueCtor {
  new (endpoint: NativeEndpoint, sendRegion: NativeMemoryRegion, options: NativeInitiatorQueueOptions, onComplete: (count: number) => void): NativeInitiatorQueue;
}

/** What the fast path's decoders make of a capsule (tests only). */
export interface NativeFastDecode {
  tag: bigint;
  lun: number;
  write: boolean;
  immediate: boolean;
  address: bigint;
  key: bigint;
  dataLength: number;
  cdb: { write: boolean; fua: boolean; lba: bigint; blocks: number } | null;
}

/** rblk_native.node: libfabric and the file operations; the one part rblk cannot do without. */
export interface NativeAddon {
  FastPath: NativeFastPathCtor;
  Reactors: NativeReactorsCtor;
  InitiatorQueue: NativeInitiatorQueueCtor;
  decodeFastCommand(capsule: Buffer, maxCapsule: number, maxTransfer: number, maxImmediate: number): NativeFastDecode | null;
  /** How the fast path frames a version-5 message (docs/protocol.md §5.1): its capsules' lengths, or null for a malformed train (tests only). */
  scanTrain(message: Buffer): number[] | null;
  Domain: NativeDomainCtor;
  MemoryRegion: NativeMemoryRegionCtor;
  Pages: NativePagesCtor;
  Listener: NativeListenerCtor;
  Endpoint: NativeEndpointCtor;
  constants: NativeConstants;
  /** Names of providers that offer FI_EP_MSG with FI_RMA on this host ('rdm': FI_EP_RDM instead). */
  providers(endpointType?: EndpointType): string[];
  libfabricVersion(): string;
  errorName(errno: number): string;
  errorMessage(errno: number): string;
  /** malloc_trim(0) where the C library has it (native/src/core/heap-trim.h): whether memory went back. */
  trimHeap(): boolean;

  // File operations the Node fs module lacks; each runs on the libuv pool.
  fallocate(fd: number, mode: number, offset: number, length: number): Promise<void>;
  /** lseek with SEEK_DATA (whence 3) or SEEK_HOLE (4); resolves -1 at ENXIO (past the last data). */
  seek(fd: number, offset: number, whence: 3 | 4): Promise<number>;
  /** BLKGETSIZE64, BLKSSZGET (logical block size). */
  blockDeviceInfo(fd: number): { size: number; logicalBlockSize: number };
  /** BLKDISCARD or BLKZEROOUT. */
  blockDeviceRange(fd: number, op: 'discard' | 'zeroout', offset: number, length: number): Promise<void>;
  /**
   * flock(LOCK_EX or LOCK_SH, LOCK_NB) on the whole file or device; throws EAGAIN
   * (.code, .errno, .op) when another open file description holds a conflicting lock.
   * Synchronous: it never waits. Closing the descriptor releases it.
   */
  lockStore(fd: number, exclusive: boolean): void;
  fallocateModes: { KEEP_SIZE: number; PUNCH_HOLE: number; ZERO_RANGE: number };
}

/** rblk_uring.node: io_uring for file and block-device I/O (native/io-ring.ts is its only user). */
export interface NativeUringAddon {
  IoRing: NativeIoRingCtor;
  /** The ring table the core addon's fast path uses (native/src/common/uring-c-api.h). */
  fastRingApi(): NativeUringApi;
}

/** rblk_fuse.node: a libfuse3 low-level session serving one file (native/fuse.ts is its only user). */
export interface NativeFuseAddon {
  FuseSession: NativeFuseSessionCtor;
}

/**
 * One RBD image through librbd's asynchronous API (native/src/rbd/rbd-image.cc);
 * native/rbd.ts is its only user. Every call completes as a
 * (token, result, offset) triple in `completions`: result is bytes or 0, or
 * -errno; offset is COMPARE AND WRITE's first mismatching byte. A triple with
 * token WATCH_TOKEN says the image's header changed (a resize).
 */
export interface NativeRbdImage {
  readonly completions: Float64Array;
  /** The librados or librbd call an open that failed stopped at. */
  readonly failedStep: string;
  open(opts: NativeRbdOpenOptions, token: number): void;
  read(buffer: Uint8Array, offset: number, token: number): void;
  write(buffer: Uint8Array, offset: number, token: number): void;
  flush(token: number): void;
  writeZeroes(offset: number, length: number, token: number): void;
  writeSame(pattern: Uint8Array, offset: number, length: number, token: number): void;
  compareAndWrite(compare: Uint8Array, data: Uint8Array, offset: number, token: number): void;
  size(): number;
  /** `<cluster fsid>/<pool id>/<image id>`: the same from every host, for the image's life. */
  id(): string;
  /** rbd_get_features: the image's RBD_FEATURE_* bits. */
  features(): number;
  /** The image's librbd handle for the core addon's fast path; valid until close(). */
  fastHandle(): NativeRbdHandle;
  close(token: number): void;
  // A record: a small RADOS object next to the image (native/src/rbd/rbd-record.cc).
  /** Result: bytes read into buffer, or -ENOENT. */
  recordRead(oid: string, buffer: Uint8Array, token: number): void;
  /** Replaces data and version if the version xattr equals expected (null: creates, -EEXIST if it exists); -ECANCELED otherwise. */
  recordWrite(oid: string, expected: string | null, version: string, data: Uint8Array, token: number): void;
  /** One watch per image; notifies arrive as RECORD_NOTIFY_TOKEN triples (result: the seq for recordAck), breaks as RECORD_ERROR_TOKEN. */
  recordWatch(oid: string, timeoutSeconds: number, token: number): void;
  recordUnwatch(token: number): void;
  /** After a recordWatch that failed: librados cancelled that watch itself. */
  recordForget(): void;
  /** Completes when every watcher acked, or with -ETIMEDOUT. */
  recordNotify(oid: string, timeoutMs: number, token: number): void;
  recordAck(seq: number): void;
  // Gateways of one image (native/src/rbd/rbd-gateway.cc).
  /** Sets xattr `name` of object `oid` to this client's address; gatewayResult is the address (or the failed step). */
  gatewayPublish(oid: string, name: string, token: number): void;
  /** Blocklists the address xattr `name` holds; result 0 (fenced), 1 (none published), 2 (this client's own), or -errno. */
  gatewayFence(oid: string, name: string, token: number): void;
  /**
   * Snapshots and clones (native/src/rbd/rbd-snap.cc): op create, remove, list or clone (of
   * snapshot `name` to image `child`), on the gateway thread; gatewayResult is then the
   * list as JSON, or the failed step.
   */
  snapOp(op: 'create' | 'remove' | 'list' | 'clone' | 'flatten', name: string, token: number, child?: string): void;
  readonly gatewayResult: string;
}

export interface NativeRbdOpenOptions {
  pool: string;
  image: string;
  namespace?: string;
  /** A snapshot of the image, opened read-only (readOnly must be true). */
  snapshot?: string;
  /** ceph.conf; empty: librados's default search. */
  conf?: string;
  /** The cephx user without `client.`; empty: admin. */
  clientId?: string;
  keyring?: string;
  /** client_mount_timeout, rados_mon_op_timeout and rados_osd_op_timeout. */
  timeoutSeconds: number;
  readOnly: boolean;
}

export interface NativeRbdImageCtor {
  new (onCompletions: (count: number) => void): NativeRbdImage;
  readonly WATCH_TOKEN: number;
  readonly RECORD_NOTIFY_TOKEN: number;
  readonly RECORD_ERROR_TOKEN: number;
  /** An operation of this client that JS did not submit (the fast path's, native/src/rbd/rbd-c-api.cc) failed with EBLOCKLISTED; once per client. */
  readonly BLOCKLISTED_TOKEN: number;
}

/** rblk_rbd.node: librbd (target/backend/rbd/ is its only user). */
export interface NativeRbdAddon {
  RbdImage: NativeRbdImageCtor;
  /** The librbd table the core addon's fast path uses (native/src/common/rbd-c-api.h). */
  fastRbdApi(): NativeRbdApi;
}

/** rblk_systemd.node: libsystemd's sd_notify(0, state): >0 sent, 0 no NOTIFY_SOCKET, <0 -errno. */
export interface NativeSystemdAddon {
  sdNotify(state: string): number;
  /** sd_journal_sendv(3) of KEY=value fields (MESSAGE=, PRIORITY=, ...); 0 or -errno. */
  sdJournalSend(fields: readonly string[]): number;
}

/** Every error the addon throws or rejects with carries these. */
export interface NativeError extends Error {
  code: string;
  errno: number;
  op: string;
}


/** The optional parts, by the feature each gives. */
export type NativeFeature = 'io_uring' | 'fuse' | 'sd_notify' | 'rbd';

interface PartInfo {
  file: string;
  /** What the user loses without it. */
  what: string;
  /** Debian packages: the headers the build needs, and the library the binary needs at run time. */
  dev: string;
  lib: string;
}

const CORE: PartInfo = { file: 'rblk_native.node', what: 'the libfabric transport', dev: 'libfabric-dev', lib: 'libfabric1' };
const PARTS: Record<NativeFeature, PartInfo> = {
  io_uring: { file: 'rblk_uring.node', what: 'io_uring file I/O', dev: 'liburing-dev', lib: 'liburing2' },
  fuse: { file: 'rblk_fuse.node', what: 'FUSE attach and mount', dev: 'libfuse3-dev', lib: 'libfuse3-3' },
  sd_notify: { file: 'rblk_systemd.node', what: 'sd_notify (systemd readiness and watchdog)', dev: 'libsystemd-dev', lib: 'libsystemd0' },
  rbd: { file: 'rblk_rbd.node', what: 'Ceph RBD volumes', dev: 'librbd-dev', lib: 'librbd1' },
};

/**
 * An optional native part that this installation lacks: not built (its
 * headers were missing at build time) or not loadable (its shared library is
 * missing at run time). .package names the Debian package that fixes it.
 */
export class FeatureUnavailableError extends Error {
  readonly code = 'ERR_RBLK_FEATURE_UNAVAILABLE';
  readonly errno = constants.errno.ENOENT;
  readonly op: string;
  readonly feature: NativeFeature;
  /** The Debian package to install. */
  readonly package: string;
  constructor(feature: NativeFeature, pkg: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'FeatureUnavailableError';
    this.feature = feature;
    this.package = pkg;
    this.op = `load ${PARTS[feature].file}`;
  }
}

/** The addon itself could not be found or loaded. */
export class NativeLoadError extends Error {
  readonly code: 'ERR_RBLK_NATIVE_NOT_FOUND' | 'ERR_RBLK_NATIVE_LOAD';
  readonly errno = constants.errno.ENOENT;
  readonly op = `load ${CORE.file}`;
  constructor(code: NativeLoadError['code'], message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'NativeLoadError';
    this.code = code;
  }
}

/** The package root: above native/ in the source layout, above dist/native/ in the compiled one. */
function packageRoot(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  for (const root of [join(here, '..'), join(here, '..', '..')]) if (existsSync(join(root, 'package.json'))) return root;
  return join(here, '..');
}

/** prebuilds/<platform>-<arch>, as prebuildify lays them out and node-gyp-build finds them. */
function prebuildDir(root = packageRoot()): string {
  return join(root, 'prebuilds', `${process.platform}-${process.arch}`);
}

/**
 * The directories to look in, in order, like node-gyp-build's: RBLK_NATIVE
 * when set ('asan': the sanitizer build in build-asan/, which
 * scripts/sanitize.sh makes and runs commands under; an absolute path: that
 * directory alone), else the local build (build/Release: a checkout, or an
 * install that had to compile), then the prebuilt binary shipped in the
 * package for this platform.
 */
function searchDirs(root = packageRoot()): string[] {
  const v = process.env.RBLK_NATIVE;
  if (v === undefined || v === '' || v === 'release') return [join(root, 'build', 'Release'), prebuildDir(root)];
  if (v === 'asan') {
    // An ASan library loaded into a process that was not started with the ASan
    // runtime aborts the whole process from inside dlopen; say why instead.
    if (!/libasan\.so/.test(process.env.LD_PRELOAD ?? ''))
      throw new Error('RBLK_NATIVE=asan needs the ASan runtime preloaded: run the command under scripts/sanitize.sh');
    return [join(root, 'build-asan', 'Release')];
  }
  if (isAbsolute(v)) return [v];
  throw new Error(`RBLK_NATIVE=${v}: must be 'release', 'asan' or an absolute directory holding ${CORE.file}`);
}

/** The directory whose rblk_native.node is used; the optional parts come from the same build. */
let chosenDir: string | undefined;

function nativeDir(): string {
  if (chosenDir !== undefined) return chosenDir;
  const dirs = searchDirs();
  const found = dirs.find((d) => existsSync(join(d, CORE.file)));
  if (found === undefined)
    throw new NativeLoadError(
      'ERR_RBLK_NATIVE_NOT_FOUND',
      `rblk native addon not found (looked in ${dirs.join(', ')}): no prebuilt binary fits ${process.platform}-${process.arch}; ` +
        `build it with \`npm rebuild rblk\` (it needs cmake, g++, pkg-config and ${CORE.dev}), or in a checkout \`npm run build\``,
    );
  chosenDir = found;
  return found;
}

// Debian's libfabric links the PSM providers, whose libinfinipath installs a
// SIGSEGV handler at load time that writes "<prog>.80s-<pid>,<host>.btr" files
// into the working directory. V8 handles some SIGSEGVs itself (WebAssembly
// bounds traps), so that handler only litters and gets in the way; this
// documented switch turns it off. It must be set before the library loads.
process.env.IPATH_NO_BACKTRACE ??= '1';

const require = createRequire(import.meta.url);

/** The shared library that dlopen could not find, from its message ("libfuse3.so.3: cannot open shared object file"). */
function missingLibrary(e: unknown): string | null {
  const m = /([\w.+-]+\.so[\w.]*): cannot open shared object file/.exec(e instanceof Error ? e.message : '');
  return m ? m[1] : null;
}

let core: NativeAddon | undefined;

/** rblk_native.node, loaded on the first call. */
export function addon(): NativeAddon {
  if (core !== undefined) return core;
  const path = join(nativeDir(), CORE.file);
  try {
    core = require(path) as NativeAddon;
  } catch (e) {
    const lib = missingLibrary(e);
    throw new NativeLoadError(
      'ERR_RBLK_NATIVE_LOAD',
      lib !== null
        ? `${path} needs ${lib}, which is not installed: apt-get install ${CORE.lib}`
        : `${path} did not load: ${e instanceof Error ? e.message : String(e)}`,
      { cause: e },
    );
  }
  return core;
}

const optional = new Map<NativeFeature, unknown>();

function loadPart<T>(feature: NativeFeature): T {
  const hit = optional.get(feature);
  if (hit !== undefined) return hit as T;
  const part = PARTS[feature];
  const path = join(nativeDir(), part.file);
  if (!existsSync(path))
    throw new FeatureUnavailableError(
      feature,
      part.dev,
      `${part.what} is not available: rblk was built without ${part.file} (${part.dev} was not installed at build time); ` +
        `apt-get install ${part.dev}, then rebuild (\`npm rebuild rblk\`, or \`npm run build\` in a checkout)`,
    );
  let mod: T;
  try {
    mod = require(path) as T;
  } catch (e) {
    const lib = missingLibrary(e);
    // Every part links libfabric too (errors.cc), so the missing library may be that one.
    const pkg = lib !== null && lib.startsWith('libfabric.') ? CORE.lib : part.lib;
    throw new FeatureUnavailableError(
      feature,
      pkg,
      lib !== null
        ? `${part.what} is not available: ${part.file} needs ${lib}; apt-get install ${pkg}`
        : `${part.what} is not available: ${path} did not load: ${e instanceof Error ? e.message : String(e)}`,
      { cause: e },
    );
  }
  optional.set(feature, mod);
  return mod;
}

/** rblk_uring.node; throws FeatureUnavailableError when this installation lacks it. */
export function uringAddon(): NativeUringAddon {
  return loadPart<NativeUringAddon>('io_uring');
}

/** rblk_fuse.node; throws FeatureUnavailableError when this installation lacks it. */
export function fuseAddon(): NativeFuseAddon {
  return loadPart<NativeFuseAddon>('fuse');
}

/** rblk_systemd.node; throws FeatureUnavailableError when this installation lacks it. */
export function systemdAddon(): NativeSystemdAddon {
  return loadPart<NativeSystemdAddon>('sd_notify');
}

/** rblk_rbd.node; throws FeatureUnavailableError when this installation lacks it. */
export function rbdAddon(): NativeRbdAddon {
  return loadPart<NativeRbdAddon>('rbd');
}

/** Whether each optional part loads here, without throwing (for `rblkd --version`-style reports and tests). */
export function nativeFeatures(): Record<NativeFeature, boolean> {
  const probe = (f: NativeFeature): boolean => {
    try {
      loadPart(f);
      return true;
    } catch (e) {
      // No addon at all (no build directory, no prebuilt) is every part unavailable too.
      if (e instanceof FeatureUnavailableError || e instanceof NativeLoadError) return false;
      throw e;
    }
  };
  return { io_uring: probe('io_uring'), fuse: probe('fuse'), sd_notify: probe('sd_notify'), rbd: probe('rbd') };
}
