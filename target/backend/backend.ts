// The seam between the SCSI core and the storage behind a volume, in the
// manner of tgt's backing_store_template (usr/bs_rdwr.c) and nvmet's
// io-cmd-file.c: byte offsets in, errno-carrying errors out. The SCSI core maps
// errno to sense in exactly one place (target/scsi/sense-map.ts); backends never
// know about SCSI.

import type { NativeRbdApi, NativeRbdHandle } from '../../native/binding.js';

/** Whether a byte range holds data or is a hole (SBC-4 5.5 GET LBA STATUS). */
export interface Extent {
  offset: number;
  length: number;
  mapped: boolean;
}

export interface WriteOptions {
  /** Force Unit Access: durable before the promise resolves (SBC-4 5.40, O_DSYNC/fdatasync). */
  fua?: boolean;
}

/** Backend.fastPathTarget: what the native fast path reads and writes itself. */
export interface FastPathTarget {
  readonly fd: number;
  readonly align: number;
  readonly rbd?: { readonly api: NativeRbdApi; readonly image: NativeRbdHandle };
}

/** Something about the store for the operator: `message` names the store. */
export interface BackendNotice {
  readonly level: 'warn' | 'error';
  readonly message: string;
}

export interface Backend {
  /** Bytes; the SCSI core derives block counts from it. */
  readonly size: number;
  readonly readOnly: boolean;
  /** True when discard() really deallocates (thin provisioning: LBPME, VPD B2). */
  readonly canDiscard: boolean;
  /**
   * Where the native fast path may read and write this store itself
   * (docs/target.md "Fast path"): a descriptor and its O_DIRECT alignment, or
   * (rbd) librbd's table and the open image, fd then -1.
   * Absent or null: every command goes through read() and write().
   */
  readonly fastPathTarget?: FastPathTarget | null;
  /**
   * Optional, with a fastPathTarget that changes while the volume is served
   * (rbd: none while fenced, a new client's after recover()): called after
   * each change, so that the LU re-decides every session's fast path at once
   * (target/scsi/fast-path-gate.ts) instead of at its next login.
   */
  onFastPathChange?(listener: (() => void) | null): void;
  /**
   * Optional: a READ or WRITE that the native fast path ran on fastPathTarget
   * failed with this errno code ('ESHUTDOWN', ...). Told before the command is
   * answered, so the store can act on what the error proves first (rbd:
   * EBLOCKLISTED fences the volume, docs/backends.md "A fenced gateway learns
   * of it").
   */
  fastPathFailed?(code: string): void;
  /** Reads exactly buf.length bytes at offset into buf (no copy: buf may be registered memory). */
  read(buf: Buffer, offset: number): Promise<void>;
  write(buf: Buffer, offset: number, opts?: WriteOptions): Promise<void>;
  /** Makes every completed write durable (SYNCHRONIZE CACHE). */
  flush(): Promise<void>;
  /** Deallocates; reads of the range then return zeroes (LBPRZ). */
  discard(offset: number, length: number): Promise<void>;
  /** Writes zeroes, deallocating when unmap is true and the backend can. */
  writeZeroes(offset: number, length: number, unmap: boolean): Promise<void>;
  /** The extent starting at offset (GET LBA STATUS); never longer than the volume. */
  extent(offset: number): Promise<Extent>;
  /** Re-reads the size (after a reload or resize); returns the new size. */
  refreshSize(): Promise<number>;
  close(): Promise<void>;
  /**
   * Optional: COMPARE AND WRITE done by the store itself, atomically for every
   * client of it (an RBD image served by several gateways). On a miscompare
   * nothing is written and it throws a MiscompareError. Without it the SCSI
   * core compares and writes under its own range lock, atomic in this process only.
   */
  compareAndWrite?(compare: Buffer, data: Buffer, offset: number, opts?: WriteOptions): Promise<void>;
  /** Optional: writes `pattern` (one or more blocks) over length bytes (WRITE SAME without a zero pattern). */
  writeSame?(pattern: Buffer, offset: number, length: number, opts?: WriteOptions): Promise<void>;
  /**
   * Optional: calls listener when the store's size may have changed outside rblkd
   * (an RBD image resized by `rbd resize`); the volume then re-reads its capacity.
   */
  onResize?(listener: (() => void) | null): void;
  /**
   * Optional: calls listener with what the operator must hear about the store,
   * which the daemon logs under the volume's name: an RBD image without the
   * exclusive-lock feature, a gateway the Ceph cluster blocklisted
   * (docs/backends.md "rbd"). Notices raised before a listener was set are
   * given to it when it is set.
   */
  /**
   * Optional: true once the store has fenced this process out for good (an RBD
   * image whose cluster blocklisted this gateway): every command of the LU but
   * those an unavailable ALUA port serves is answered NOT READY 04/0C.
   */
  readonly fenced?: boolean;
  /** Optional, with `fenced` and recover(): called each time the store fences this process out. */
  onFenced?(listener: (() => void) | null): void;
  /**
   * Optional: after a fence, makes this process's client of the store anew
   * and serves again (rbd: a new librados client, docs/backends.md "A fenced
   * gateway comes back"); rejects while the store is unreachable. The caller
   * first makes sure that no command from before the fence can still reach
   * the store (the daemon ends the volume's connections and waits for the LU
   * to go idle). Resolves how the store now names this process, or ''.
   */
  recover?(): Promise<string>;
  onNotice?(listener: ((notice: BackendNotice) => void) | null): void;
  /**
   * Optional: whether one write() is all-or-nothing for every client of the
   * store once this process applies it under its exclusive range lock
   * (WRITE ATOMIC(16), SBC-4 5.48). Absent or true: rblkd is the store's only
   * writer (a file, a block device, RAM), so nobody can see a write half done.
   * False: other hosts write the store too and the store splits writes (an RBD
   * image served by several gateways); the LU then offers no WRITE ATOMIC.
   */
  readonly atomicWrites?: boolean;
  /** Optional: a name of the store that every host serving it agrees on (an RBD image id), for VPD 83h. */
  readonly sharedIdentity?: string;
  /**
   * Optional: a small record kept with the store itself, which every host
   * serving it reads, replaces by compare-and-swap and watches (an RBD image's
   * RADOS object); `purpose` names it ("pr": persistent reservations,
   * docs/architecture.md "Reservation stores"). Only a store shared between
   * hosts has one.
   */
  openSharedRecord?(purpose: string): Promise<SharedRecord>;
  /**
   * Optional, with fenceGateway: a store shared between gateways, which can
   * keep one of them out of the store for good (an RBD image: the Ceph
   * blocklist). Each gateway publishes, under its target port group, how the
   * store names it (docs/backends.md "Fencing another gateway").
   */
  publishGateway?(group: number): Promise<string>;
  /**
   * Keeps the gateway of target port group `group` out of the store: nothing
   * it sent or will send lands after this gateway's next operations. Resolves
   * what was done; `unknown` when no gateway of that group ever published.
   */
  fenceGateway?(group: number): Promise<GatewayFenceResult>;
  /** Optional: the store's own snapshots and clones (an RBD image's); file volumes' are reflinks (target/backend/reflink.ts). */
  readonly snapshots?: StoreSnapshots;
}

/** A store's own snapshots (an RBD image's), for `rblkd ctl snapshot` (docs/operations.md "Snapshots and clones"). */
export interface StoreSnapshots {
  /** Takes snapshot `name` of the store as it is now; the caller has quiesced and flushed. */
  create(name: string): Promise<void>;
  /** Every snapshot; created is ISO 8601. */
  list(): Promise<{ name: string; size: number; created: string }[]>;
  remove(name: string): Promise<void>;
  /** Makes `child` a new store cloned from snapshot `name`; resolves how it is named (pool/image). */
  clone(name: string, child: string): Promise<string>;
  /** Copies a clone's parent data into it and cuts the link (librbd's flatten); EINVAL when the store is no clone. */
  flatten(): Promise<void>;
}

/** What fenceGateway did. */
export type GatewayFenceResult = { readonly kind: 'fenced'; readonly address: string } | { readonly kind: 'unknown' } | { readonly kind: 'self' };

/** What a SharedRecord's watcher hears. */
export interface SharedRecordEvents {
  /** The record may have changed (a writer published); call ack() once it is read again. */
  changed(ack: () => void): void;
  /** The watch broke: changes may have been missed until rewatch() and a read. */
  broken(e: Error): void;
}

/** A record kept with a shared store; the backend knows nothing of what it holds. */
export interface SharedRecord {
  /** How operators find it (a RADOS object in a pool), for logs and errors. */
  readonly where: string;
  /**
   * How long one operation on the store may take before it fails (rbd:
   * timeout_s); commands fenced while the record is read again wait at most this.
   */
  readonly timeoutMs: number;
  /** The data and its version; null when the record does not exist. */
  read(): Promise<{ version: string; data: Buffer } | null>;
  /**
   * Replaces the data, atomically, if the version is still `expected` (null:
   * creates the record). Resolves false when another writer got there first or
   * the record is gone; throws when the store cannot be reached.
   */
  write(expected: string | null, version: string, data: Buffer): Promise<boolean>;
  /** Tells every watcher; resolves true once all acked, false when one stayed silent until the timeout. */
  publish(): Promise<boolean>;
  /** Starts watching (one watcher per record and backend). */
  watch(events: SharedRecordEvents): Promise<void>;
  /** Drops a broken watch and registers it again. */
  rewatch(): Promise<void>;
}

/** What compareAndWrite throws when the compare instance differs from the medium (SBC-4 5.3). */
export interface MiscompareError extends BackendError {
  code: 'EILSEQ';
  /** The first differing byte, counted from the start of the request. */
  mismatchOffset: number;
}

export function isMiscompare(e: unknown): e is MiscompareError {
  return (
    typeof e === 'object' && e !== null && (e as { code?: unknown }).code === 'EILSEQ' &&
    typeof (e as { mismatchOffset?: unknown }).mismatchOffset === 'number'
  );
}

/** What a backend throws: a Node-style error with a string errno code (EIO, ENOSPC, ...). */
export interface BackendError extends Error {
  code: string;
  errno?: number;
}
