// Promise API over the addon's RBD image (native/src/rbd/rbd-image.cc), for the rbd
// backend (target/backend/rbd/). One promise per call, the open and close
// included; each buffer stays referenced here until its completion, so librbd
// never reads or writes memory that JS has let go. Errors carry .code, .errno
// and .op like every native error; a miscompare carries .mismatchOffset.
import { constants as osConstants } from 'node:os';
import { getSystemErrorName } from 'node:util';
import { rbdAddon, type NativeRbdApi, type NativeRbdHandle, type NativeRbdImage, type NativeRbdOpenOptions } from './binding.js';

export type RbdOpenOptions = NativeRbdOpenOptions;

/** librbd's features.h. */
const RBD_FEATURE_EXCLUSIVE_LOCK = 1 << 2;
/**
 * The errno librados returns to a client the cluster has blocklisted
 * (EBLOCKLISTED is ESHUTDOWN on Linux): every operation of that client fails
 * with it until the client is made anew.
 */
export const EBLOCKLISTED = 'ESHUTDOWN';
const EBLOCKLISTED_ERRNO = (osConstants.errno as Record<string, number | undefined>).ESHUTDOWN ?? 108;

/** A librados or librbd call that failed, with the errno it returned. */
export class RbdError extends Error {
  readonly code: string;
  readonly errno: number;
  readonly op: string;
  /** COMPARE AND WRITE (EILSEQ): the first byte that differed, from the start of the request. */
  mismatchOffset?: number;
  constructor(errno: number, op: string, detail?: string) {
    let code: string;
    try {
      code = getSystemErrorName(-errno);
    } catch {
      code = `E${errno}`;
    }
    super(`${op}: ${code} (errno ${errno})${detail === undefined ? '' : `: ${detail}`}`);
    this.name = 'RbdError';
    this.code = code;
    this.errno = errno;
    this.op = op;
  }
}

interface Pending {
  resolve: (r: { result: number; offset: number }) => void;
  reject: (e: Error) => void;
  op: string;
  /** Held so the memory outlives the call. */
  buffers: Uint8Array[];
}

/** What the watcher of a record hears (recordWatch). */
export type RecordEvent =
  /** Another client (or this one) notified: ack(seq) once the record is read again. */
  | { readonly kind: 'notify'; readonly seq: number }
  /** The watch broke (the OSD or the cluster went away): notifies may have been missed. */
  | { readonly kind: 'error'; readonly error: RbdError };

/** What gatewayFence did: blocklisted that address, found none published under the name, or found this client's own. */
export type GatewayFence = { readonly kind: 'fenced'; readonly address: string } | { readonly kind: 'unknown' } | { readonly kind: 'self' };

export class RbdImage {
  readonly #image: NativeRbdImage;
  readonly #watchToken: number;
  readonly #notifyToken: number;
  readonly #errorToken: number;
  readonly #blocklistedToken: number;
  /** The image's header object (rbd_header.<image id>), which the blocklist probe reads (#probe). */
  #headerOid = '';
  readonly #pending = new Map<number, Pending>();
  #next = 1;
  #onChange: (() => void) | null = null;
  #onRecord: ((e: RecordEvent) => void) | null = null;
  #onBlocklisted: (() => void) | null = null;
  /** Sticky: a listener set after the signal still hears it (onBlocklisted). */
  #blocklisted = false;

  private constructor() {
    const { RbdImage: Ctor } = rbdAddon();
    this.#watchToken = Ctor.WATCH_TOKEN;
    this.#notifyToken = Ctor.RECORD_NOTIFY_TOKEN;
    this.#errorToken = Ctor.RECORD_ERROR_TOKEN;
    this.#blocklistedToken = Ctor.BLOCKLISTED_TOKEN;
    this.#image = new Ctor((n) => this.#complete(n));
  }

  /**
   * Connects to the cluster and opens the image; fails with the step that failed
   * (rados_connect ETIMEDOUT when no monitor answers within the timeout).
   */
  static async open(options: RbdOpenOptions): Promise<RbdImage> {
    const image = new RbdImage();
    await image.#call('rbd open', [], (t) => image.#image.open(options, t)).catch((e: unknown) => {
      if (e instanceof RbdError) {
        const step = image.#image.failedStep;
        throw new RbdError(e.errno, step === '' ? 'rbd open' : step, `${options.pool}/${options.namespace ? `${options.namespace}/` : ''}${options.image}`);
      }
      throw e;
    });
    image.#headerOid = `rbd_header.${image.id().split('/').pop() ?? ''}`;
    return image;
  }

  /** Called when librbd sees the image's header change (rbd_update_watch): a resize, say. */
  onChange(fn: (() => void) | null): void {
    this.#onChange = fn;
  }

  /**
   * Called (once per batch of completions) when an operation or a watch of
   * this image failed with EBLOCKLISTED: the cluster blocklisted this client,
   * and every operation of it fails from now on (docs/backends.md "rbd").
   * Every signal counts: an operation of JS's (its completion, or a refused
   * submission), one of the native fast path's (told by rblk_rbd once,
   * native/src/rbd/rbd-c-api.cc, whether or not anyone answers the command), and
   * the image's and the record's watches, which are followed by a probe
   * (#probe) since librbd's own refresh can swallow the error first.
   */
  onBlocklisted(fn: (() => void) | null): void {
    this.#onBlocklisted = fn;
    // The signal came before the listener (between the open and the listener, say): not lost.
    if (fn !== null && this.#blocklisted) queueMicrotask(() => this.#onBlocklisted?.());
  }

  #tellBlocklisted(): void {
    this.#blocklisted = true;
    this.#onBlocklisted?.();
  }

  get inFlight(): number {
    return this.#pending.size;
  }

  size(): number {
    try {
      return this.#image.size();
    } catch (e) {
      if ((e as { code?: unknown }).code === EBLOCKLISTED) this.#tellBlocklisted();
      throw e;
    }
  }

  /** `<cluster fsid>/<pool id>/<image id>`: the same from every host, for the image's life. */
  id(): string {
    return this.#image.id();
  }

  /** Whether the image has the exclusive-lock feature (RBD_FEATURE_EXCLUSIVE_LOCK, rbd_get_features). */
  hasExclusiveLock(): boolean {
    return (this.#image.features() & RBD_FEATURE_EXCLUSIVE_LOCK) !== 0;
  }

  // READ and WRITE are the hot path (docs/performance.md "rblk over an RBD
  // volume"): one promise per I/O, settled straight from the completion batch.
  read(buf: Uint8Array, offset: number): Promise<void> {
    return this.#io('rbd_aio_read', buf, (t) => this.#image.read(buf, offset, t));
  }

  write(buf: Uint8Array, offset: number): Promise<void> {
    return this.#io('rbd_aio_write', buf, (t) => this.#image.write(buf, offset, t));
  }

  async flush(): Promise<void> {
    await this.#call('rbd_aio_flush', [], (t) => this.#image.flush(t));
  }

  /** Deallocates the objects the range covers whole and zeroes the rest. */
  async writeZeroes(offset: number, length: number): Promise<void> {
    await this.#call('rbd_aio_write_zeroes', [], (t) => this.#image.writeZeroes(offset, length, t));
  }

  async writeSame(pattern: Uint8Array, offset: number, length: number): Promise<void> {
    await this.#call('rbd_aio_writesame', [pattern], (t) => this.#image.writeSame(pattern, offset, length, t));
  }

  /** Atomic on the OSD; a miscompare rejects with EILSEQ and mismatchOffset. */
  async compareAndWrite(compare: Uint8Array, data: Uint8Array, offset: number): Promise<void> {
    await this.#call('rbd_aio_compare_and_write', [compare, data], (t) => this.#image.compareAndWrite(compare, data, offset, t));
  }

  /**
   * Reads record `oid` (a RADOS object in the image's pool and namespace) into
   * buf; resolves the bytes read, or null when there is no such object.
   */
  async recordRead(oid: string, buf: Uint8Array): Promise<number | null> {
    try {
      return (await this.#call('rados_aio_read', [buf], (t) => this.#image.recordRead(oid, buf, t))).result;
    } catch (e) {
      if (e instanceof RbdError && e.code === 'ENOENT') return null;
      throw e;
    }
  }

  /**
   * Replaces the record's data and version, atomically, if its version is
   * `expected` (null: creates it). Resolves false when another writer got there
   * first (ECANCELED, EEXIST) or the record is gone (ENOENT); throws on anything else.
   */
  async recordWrite(oid: string, expected: string | null, version: string, data: Uint8Array): Promise<boolean> {
    try {
      await this.#call('rados_aio_write_op_operate', [data], (t) => this.#image.recordWrite(oid, expected, version, data, t));
      return true;
    } catch (e) {
      if (e instanceof RbdError && (e.code === 'ECANCELED' || e.code === 'EEXIST' || e.code === 'ENOENT')) return false;
      throw e;
    }
  }

  /** Watches record `oid` (one per image); events go to onRecord's listener. */
  async recordWatch(oid: string, timeoutSeconds: number): Promise<void> {
    await this.#call('rados_aio_watch2', [], (t) => this.#image.recordWatch(oid, timeoutSeconds, t)).catch((e: unknown) => {
      // librados cancels a watch that failed; it must not be unwatched again.
      this.#image.recordForget();
      throw e;
    });
  }

  async recordUnwatch(): Promise<void> {
    await this.#call('rados_aio_unwatch', [], (t) => this.#image.recordUnwatch(t));
  }

  /** Resolves true once every watcher acked, false when one stayed silent for timeoutMs. */
  async recordNotify(oid: string, timeoutMs: number): Promise<boolean> {
    try {
      await this.#call('rados_aio_notify', [], (t) => this.#image.recordNotify(oid, timeoutMs, t));
      return true;
    } catch (e) {
      if (e instanceof RbdError && e.code === 'ETIMEDOUT') return false;
      throw e;
    }
  }

  recordAck(seq: number): void {
    this.#image.recordAck(seq);
  }

  /**
   * Publishes this client's address as xattr `name` of object `oid`, for
   * another gateway that may have to fence this one (gatewayFence). Resolves
   * the address.
   */
  async gatewayPublish(oid: string, name: string): Promise<string> {
    await this.#call('rados_setxattr', [], (t) => this.#image.gatewayPublish(oid, name, t)).catch((e: unknown) => {
      throw e instanceof RbdError ? new RbdError(e.errno, this.#image.gatewayResult) : e;
    });
    return this.#image.gatewayResult;
  }

  /**
   * Has the cluster blocklist the client whose address xattr `name` of `oid`
   * holds, and waits until this client has the OSD map that carries the
   * blocklist: no operation of the fenced client lands after this client's
   * next ones (native/src/rbd/rbd-gateway.cc).
   */
  async gatewayFence(oid: string, name: string): Promise<GatewayFence> {
    const { result } = await this.#call('rados_mon_command', [], (t) => this.#image.gatewayFence(oid, name, t)).catch((e: unknown) => {
      throw e instanceof RbdError ? new RbdError(e.errno, this.#image.gatewayResult) : e;
    });
    if (result === 1) return { kind: 'unknown' };
    if (result === 2) return { kind: 'self' };
    return { kind: 'fenced', address: this.#image.gatewayResult };
  }

  /** One snapshot operation (native/src/rbd/rbd-snap.cc); the failed step is the error's message. */
  async #snapOp(op: 'create' | 'remove' | 'list' | 'clone' | 'flatten', name: string, child?: string): Promise<string> {
    await this.#call(`rbd snapshot ${op}`, [], (t) => this.#image.snapOp(op, name, t, child)).catch((e: unknown) => {
      throw e instanceof RbdError ? new RbdError(e.errno, this.#image.gatewayResult) : e;
    });
    return this.#image.gatewayResult;
  }

  /** rbd_snap_create: a snapshot of the image as it is now (the caller quiesces and flushes first). */
  async snapCreate(name: string): Promise<void> {
    await this.#snapOp('create', name);
  }

  /** Every snapshot: name, size in bytes, creation time in seconds since the epoch. */
  async snapList(): Promise<{ name: string; size: number; created: number }[]> {
    // The name is not used by list; the addon takes only non-empty ones.
    return JSON.parse(await this.#snapOp('list', '-')) as { name: string; size: number; created: number }[];
  }

  /** Unprotects (if protected) and removes; EBUSY while clones of it exist. */
  async snapRemove(name: string): Promise<void> {
    await this.#snapOp('remove', name);
  }

  /** Protects the snapshot (if not yet) and clones it to image `child` in the same pool and namespace. */
  async snapClone(name: string, child: string): Promise<void> {
    await this.#snapOp('clone', name, child);
  }

  /** rbd_flatten: a clone gets its parent's data and loses its parent (EINVAL when it has none). */
  async flatten(): Promise<void> {
    // The name is not used by flatten; the addon takes only non-empty ones.
    await this.#snapOp('flatten', '-');
  }

  onRecord(fn: ((e: RecordEvent) => void) | null): void {
    this.#onRecord = fn;
  }

  /**
   * What the native fast path needs to call librbd on this image itself
   * (native/src/common/rbd-c-api.h): valid until close(), which the caller starts
   * only once no fast-path command runs on it (docs/target.md "Fast path").
   */
  fastTarget(): { api: NativeRbdApi; image: NativeRbdHandle } {
    return { api: rbdAddon().fastRbdApi(), image: this.#image.fastHandle() };
  }

  /** Waits for nothing: the caller has let every I/O complete. Disconnects from the cluster. */
  async close(): Promise<void> {
    this.#onChange = null;
    this.#onRecord = null;
    this.#onBlocklisted = null;
    await this.#call('rbd_close', [], (t) => this.#image.close(t));
  }

  /**
   * One RADOS read of the image's header object, for its error alone: a
   * blocklisted client gets EBLOCKLISTED, which #complete reports. Sent when a
   * watch of this client broke or came back (librbd reports the header
   * watch's re-registration, failed or not, as an image change): librbd's own
   * refresh after such a break may take the EBLOCKLISTED and leave the image
   * looking healthy (rbd_get_size then succeeds), so the watch alone is not
   * proof that we hear of it (docs/backends.md "A fenced gateway learns of it").
   */
  #probe(): void {
    if (this.#headerOid === '' || this.#onBlocklisted === null || this.#blocklisted) return;
    void this.recordRead(this.#headerOid, Buffer.alloc(1)).catch(() => undefined);
  }

  /** A submission the addon refused at once (it threw) with EBLOCKLISTED is a signal too. */
  #submit(submit: (token: number) => void, token: number): void {
    try {
      submit(token);
    } catch (e) {
      if ((e as { code?: unknown }).code === EBLOCKLISTED) queueMicrotask(() => this.#tellBlocklisted());
      throw e;
    }
  }

  #call(op: string, buffers: Uint8Array[], submit: (token: number) => void): Promise<{ result: number; offset: number }> {
    const token = this.#next;
    this.#next = this.#next >= 0x7fffffff ? 1 : this.#next + 1;
    return new Promise((resolve, reject) => {
      this.#submit(submit, token);
      this.#pending.set(token, { resolve, reject, op, buffers });
    });
  }

  #io(op: string, buf: Uint8Array, submit: (token: number) => void): Promise<void> {
    const token = this.#next;
    this.#next = this.#next >= 0x7fffffff ? 1 : this.#next + 1;
    return new Promise<void>((resolve, reject) => {
      this.#submit(submit, token);
      this.#pending.set(token, { resolve: () => resolve(), reject, op, buffers: [buf] });
    });
  }

  #complete(count: number): void {
    const c = this.#image.completions;
    let changed = false;
    let blocklisted = false;
    let watchBroke = false;
    for (let i = 0; i < count; i++) {
      const token = c[3 * i];
      const result = c[3 * i + 1];
      const offset = c[3 * i + 2];
      if (token === this.#watchToken) {
        changed = true;
        continue;
      }
      if (token === this.#notifyToken) {
        this.#onRecord?.({ kind: 'notify', seq: result });
        continue;
      }
      if (token === this.#errorToken) {
        // Mostly ENOTCONN (the OSD dropped the watch, as it does a blocklisted client's): probed below.
        if (result === -EBLOCKLISTED_ERRNO) blocklisted = true;
        else watchBroke = true;
        this.#onRecord?.({ kind: 'error', error: new RbdError(-result, 'rados watch') });
        continue;
      }
      if (token === this.#blocklistedToken) {
        blocklisted = true;
        continue;
      }
      const p = this.#pending.get(token);
      if (p === undefined) continue;
      this.#pending.delete(token);
      if (result < 0) {
        if (result === -EBLOCKLISTED_ERRNO) blocklisted = true;
        const e = new RbdError(-result, p.op);
        if (e.code === 'EILSEQ') e.mismatchOffset = offset;
        p.reject(e);
      } else p.resolve({ result, offset });
    }
    if (blocklisted) this.#tellBlocklisted();
    else if (changed || watchBroke) this.#probe();
    if (changed) this.#onChange?.();
  }
}
