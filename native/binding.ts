// The only file that loads the native addon (build/Release/rblk_native.node,
// or the sanitizer variant in build-asan/ when RBLK_NATIVE=asan).
// Everything here is a typed view of what native/src/*.cc exports; the
// promise-based API that the rest of rblk uses lives in fabric.ts and files.ts.
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
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
  /** fi_domain_attr.mr_key_size, in bytes. */
  mrKeySize: number;
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

export interface NativeDomainCtor {
  new (provider: string, node: string | null, service: string | null, source: boolean, mrMode: MrModeRequest): NativeDomain;
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
  /** remoteAccess adds FI_REMOTE_READ | FI_REMOTE_WRITE; endpoint binds under FI_MR_ENDPOINT. */
  new (domain: NativeDomain, size: number, remoteAccess: boolean, endpoint: NativeEndpoint | null): NativeMemoryRegion;
}

/** One connection-manager event from an event queue. */
export interface NativeCmEvent {
  type: 'connreq' | 'connected' | 'shutdown' | 'error';
  /** For connreq: an id to hand to accept() or reject(). */
  requestId?: number;
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
/** A remote piece: [address, length, key]. */
export type NativeRmaIov = [bigint, number, bigint];

export interface NativeEndpoint {
  /**
   * Completions arrive in batches: onCompletions(count) is called once per
   * batch, with completions.subarray(0, 3*count) holding (context, status, length)
   * triples. status is 0 or a positive libfabric errno.
   */
  readonly completions: Uint32Array;
  /** fi_connect to the address given at construction. */
  connect(node: string, service: string, privateData: Buffer | null): void;
  /** fi_accept, for an endpoint made from a listener's connection request. */
  accept(privateData: Buffer | null): void;
  /** Posts a send from registered memory; context is reported on completion. */
  send(mr: NativeMemoryRegion, offset: number, length: number, context: number): void;
  /** fi_inject: no completion; the bytes are copied before it returns. */
  inject(data: Buffer): void;
  recv(mr: NativeMemoryRegion, offset: number, length: number, context: number): void;
  /** RMA read (isWrite false) or write; deliveryComplete asks for FI_DELIVERY_COMPLETE. */
  rma(isWrite: boolean, local: NativeIov[], remote: NativeRmaIov[], context: number, deliveryComplete: boolean): void;
  /** 64-bit atomics: op 'add' (fetch-add) or 'cswap'; operand and compare live in scratch, result lands there. */
  atomic(op: 'add' | 'cswap', scratch: NativeMemoryRegion, offset: number, address: bigint, key: bigint, context: number): void;
  /** Drains the CQ now (used when the caller needs progress without waiting for the fd). */
  poll(): void;
  /** Spin on the CQ for up to this many µs before sleeping on the fd (0: off, the default). */
  setBusyPoll(microseconds: number): void;
  /** fi_shutdown + close of ep, cq, eq; returns the contexts of operations that never completed. */
  close(): number[];
}

export interface NativeEndpointCtor {
  /** From a listener's connreq (listener + requestId) or for an active connect (listener null). */
  new (
    domain: NativeDomain,
    listener: NativeListener | null,
    requestId: number,
    node: string | null,
    service: string | null,
    onCompletions: (count: number) => void,
    onEvent: (ev: NativeCmEvent) => void,
  ): NativeEndpoint;
}

/** What the one-file FUSE filesystem shows (native/src/fuse-session.h). */
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

/** An io_uring (native/src/io-ring.cc); native/io-ring.ts is its only user. */
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

export interface NativeAddon {
  Domain: NativeDomainCtor;
  MemoryRegion: NativeMemoryRegionCtor;
  Listener: NativeListenerCtor;
  Endpoint: NativeEndpointCtor;
  constants: NativeConstants;
  /** Names of providers that offer FI_EP_MSG with FI_RMA on this host. */
  providers(): string[];
  libfabricVersion(): string;
  errorName(errno: number): string;
  errorMessage(errno: number): string;

  // File operations the Node fs module lacks; each runs on the libuv pool.
  fallocate(fd: number, mode: number, offset: number, length: number): Promise<void>;
  /** lseek with SEEK_DATA (whence 3) or SEEK_HOLE (4); resolves -1 at ENXIO (past the last data). */
  seek(fd: number, offset: number, whence: 3 | 4): Promise<number>;
  /** BLKGETSIZE64, BLKSSZGET (logical block size). */
  blockDeviceInfo(fd: number): { size: number; logicalBlockSize: number };
  /** BLKDISCARD or BLKZEROOUT. */
  blockDeviceRange(fd: number, op: 'discard' | 'zeroout', offset: number, length: number): Promise<void>;
  fallocateModes: { KEEP_SIZE: number; PUNCH_HOLE: number; ZERO_RANGE: number };

  /** libsystemd's sd_notify(0, state): >0 sent, 0 no NOTIFY_SOCKET, <0 -errno. */
  sdNotify(state: string): number;

  /** io_uring for file and block-device I/O (native/io-ring.ts). */
  IoRing: NativeIoRingCtor;

  /** libfuse3 low-level session serving one file (native/fuse.ts is its only user). */
  FuseSession: NativeFuseSessionCtor;
}

/** Every error the addon throws or rejects with carries these. */
export interface NativeError extends Error {
  code: string;
  errno: number;
  op: string;
}

/**
 * Which build to load: RBLK_NATIVE unset (or 'release') is build/, 'asan' the
 * ASan+UBSan variant in build-asan/ that scripts/sanitize.sh builds and runs
 * commands under (docs/transport.md "Sanitizer build").
 */
function variant(): { dir: string; hint: string } {
  const v = process.env.RBLK_NATIVE;
  if (v === undefined || v === '' || v === 'release')
    return { dir: 'build', hint: 'run `npm run build` (it needs libfabric-dev, libfuse3-dev, libsystemd-dev)' };
  if (v === 'asan') {
    // An ASan library loaded into a process that was not started with the ASan
    // runtime aborts the whole process from inside dlopen; say why instead.
    if (!/libasan\.so/.test(process.env.LD_PRELOAD ?? ''))
      throw new Error('RBLK_NATIVE=asan needs the ASan runtime preloaded: run the command under scripts/sanitize.sh');
    return { dir: 'build-asan', hint: 'run `bash scripts/sanitize.sh true` to build it' };
  }
  throw new Error(`RBLK_NATIVE=${v}: must be 'release' or 'asan'`);
}

function locate(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const { dir, hint } = variant();
  // Source (native/) and compiled (dist/native/) layouts both resolve to <root>/<dir>.
  for (const root of [join(here, '..'), join(here, '..', '..')]) {
    const p = join(root, dir, 'Release', 'rblk_native.node');
    if (existsSync(p)) return p;
  }
  throw new Error(`rblk native addon not built in ${dir}/: ${hint}`);
}

// Debian's libfabric links the PSM providers, whose libinfinipath installs a
// SIGSEGV handler at load time that writes "<prog>.80s-<pid>,<host>.btr" files
// into the working directory. V8 handles some SIGSEGVs itself (WebAssembly
// bounds traps), so that handler only litters and gets in the way; this
// documented switch turns it off. It must be set before the library loads.
process.env.IPATH_NO_BACKTRACE ??= '1';

const require = createRequire(import.meta.url);
export const addon: NativeAddon = require(locate()) as NativeAddon;
