// A volume on a Ceph RBD image, through librbd's asynchronous API
// (native/rbd.ts). The image's size is the volume's; librbd's update watch
// tells us when `rbd resize` (from any host) changed it. COMPARE AND WRITE is
// librbd's own compare-and-write, which the OSD executes atomically, so it is
// atomic across every gateway serving the image (docs/backends.md "rbd").
// Operations of a cluster that is away fail after the configured timeout with
// ETIMEDOUT (rados_osd_op_timeout), never hang; later ones work again once the
// cluster is back, since librados reconnects by itself.
// Several gateways on one image are kept from overtaking each other's writes by
// librbd's exclusive lock (docs/backends.md "Several gateways and stale
// writes"): a gateway that takes the lock from one that stopped answering
// breaks it and has the cluster blocklist that one's client. An rblk initiator
// that fails over has the new gateway blocklist the old one itself
// (publishGateway, fenceGateway; docs/backends.md "Fencing another gateway"),
// which also covers a gateway that did not own the lock. A blocklisted
// gateway's operations all fail with EBLOCKLISTED (ESHUTDOWN); this backend
// then says so once and fences the volume: every later operation fails at once.
import { EBLOCKLISTED, RbdImage, type RbdOpenOptions } from '../../../native/rbd.js';
import type { Backend, BackendNotice, Extent, FastPathTarget, GatewayFenceResult, SharedRecord, WriteOptions } from '../backend.js';
import { backendError } from '../backend-error.js';
import { IoGate } from '../io-gate.js';
import { checkRange } from '../range-check.js';
import { RbdRecord } from './rbd-record.js';

export class RbdBackend implements Backend {
  readonly readOnly: boolean;
  /**
   * Discard is librbd's write-zeroes: it deallocates the objects the range covers
   * whole and zeroes the rest, at any alignment, so reads return zeroes (LBPRZ).
   * rbd_aio_discard would skip ranges under rbd_discard_granularity_bytes (64 KiB)
   * and leave their data readable.
   */
  readonly canDiscard = true;
  readonly sharedIdentity: string;
  /** librbd splits a write at object boundaries and other gateways write the image too: no WRITE ATOMIC (backend.ts). */
  readonly atomicWrites = false;
  readonly #image: RbdImage;
  readonly #what: string;
  readonly #gate: IoGate;
  readonly #pool: string;
  readonly #timeoutSeconds: number;
  #record: RbdRecord | undefined;
  #size: number;
  readonly #fast: FastPathTarget | null;
  /** Set once the cluster blocklisted this client: every operation fails with EBLOCKLISTED. */
  #fenced = false;
  #notices: BackendNotice[] = [];
  #gatewayTurn: Promise<void> = Promise.resolve();
  #onNotice: ((notice: BackendNotice) => void) | null = null;

  private constructor(image: RbdImage, what: string, options: RbdOpenOptions, fastPath: boolean) {
    this.#image = image;
    this.#what = what;
    this.readOnly = options.readOnly;
    this.#pool = `${options.pool}${options.namespace !== undefined && options.namespace !== '' ? ` (namespace ${options.namespace})` : ''}`;
    this.#timeoutSeconds = options.timeoutSeconds;
    this.#size = image.size();
    this.sharedIdentity = image.id();
    this.#gate = new IoGate(what);
    this.#fast = fastPath ? { fd: -1, align: 1, rbd: image.fastTarget() } : null;
    image.onBlocklisted(() => this.#blocklisted());
    if (!options.readOnly && !image.hasExclusiveLock()) {
      this.#notice({
        level: 'warn',
        message:
          `${what} has no exclusive-lock feature: if another gateway serves it too, a write this gateway held while frozen or cut off ` +
          `can land after a newer one written through the other, unless the initiator had this gateway fenced first (rblk initiators do; ` +
          `other SCSI initiators do not: docs/backends.md "Fencing another gateway"); ` +
          `turn it on with \`rbd feature enable ${options.pool}/${options.namespace !== undefined && options.namespace !== '' ? `${options.namespace}/` : ''}${options.image} exclusive-lock\``,
      });
    }
  }

  get fenced(): boolean {
    return this.#fenced;
  }

  onNotice(listener: ((notice: BackendNotice) => void) | null): void {
    this.#onNotice = listener;
    if (listener === null) return;
    const pending = this.#notices;
    this.#notices = [];
    for (const n of pending) listener(n);
  }

  #notice(n: BackendNotice): void {
    if (this.#onNotice !== null) this.#onNotice(n);
    else this.#notices.push(n);
  }

  #blocklisted(): void {
    if (this.#fenced) return;
    this.#fenced = true;
    this.#notice({
      level: 'error',
      message:
        `${this.#what}: the Ceph cluster blocklisted this gateway (EBLOCKLISTED): another gateway fenced it for an initiator that ` +
        'failed over (FENCE GATEWAY), or another client broke its exclusive lock, most likely while this one was frozen or cut off. The OSDs refuse every write this gateway ' +
        'still held, and the volume is fenced: each command fails NOT READY 04/0C, which sends multipath initiators to another path. ' +
        'Restart rblkd on this host to serve the volume again (docs/operations.md "A gateway blocklisted by Ceph")',
    });
  }

  /** Fails at once once the cluster blocklisted this client (see #blocklisted). */
  #checkFence(op: string): void {
    if (this.#fenced) throw backendError(EBLOCKLISTED, `${this.#what}: ${op} refused: the Ceph cluster blocklisted this gateway (EBLOCKLISTED)`);
  }

  /** fastPath false (the volume's `rbd.fast_path`): every READ and WRITE goes through read() and write(). */
  static async open(options: RbdOpenOptions, fastPath = true): Promise<RbdBackend> {
    const image = await RbdImage.open(options);
    const ns = options.namespace !== undefined && options.namespace !== '' ? `${options.namespace}/` : '';
    try {
      return new RbdBackend(image, `rbd image ${options.pool}/${ns}${options.image}`, options, fastPath);
    } catch (e) {
      await image.close().catch(() => undefined);
      throw e;
    }
  }

  /**
   * librbd's table and this image's handle, for the native fast path to
   * submit READ and WRITE itself (docs/target.md "Fast path"). Null once
   * close() has begun, or when the volume's rbd.fast_path is false; the LU
   * revokes the fast path and waits for it before the close (as for a file).
   */
  get fastPathTarget(): FastPathTarget | null {
    if (this.#gate.closed) return null;
    return this.#fast;
  }

  /**
   * `rblk_<purpose>.<image id>`, a RADOS object in the image's pool: the image
   * id (rbd_get_id) survives a rename, as VPD 83h does. One per backend.
   */
  openSharedRecord(purpose: string): Promise<SharedRecord> {
    return this.#gate.run(async () => {
      if (this.#record !== undefined) throw new Error(`${this.#what}: its ${purpose} record is open already`);
      const imageId = this.sharedIdentity.split('/').pop() ?? '';
      const oid = `rblk_${purpose}.${imageId}`;
      this.#record = new RbdRecord(this.#image, this.#gate, oid, `rados object ${oid} in pool ${this.#pool}`, this.#timeoutSeconds);
      return Promise.resolve(this.#record);
    });
  }

  /**
   * `rblk_gateways.<image id>`, a RADOS object next to the image: one xattr
   * per target port group, `group.<n>`, holding the librados client address
   * of the gateway that serves the image in that group (native/src/rbd-gateway.cc).
   */
  get #gatewaysObject(): string {
    return `rblk_gateways.${this.sharedIdentity.split('/').pop() ?? ''}`;
  }

  publishGateway(group: number): Promise<string> {
    return this.#oneGatewayOp(() => {
      this.#checkFence('publish gateway');
      return this.#image.gatewayPublish(this.#gatewaysObject, `group.${group}`);
    });
  }

  /**
   * Has the cluster blocklist the client that group `group` published. Its
   * operations on the wire, queued in its librbd for the exclusive lock, or
   * still to come, are all refused by the OSDs after this resolves; the
   * gateway itself sees EBLOCKLISTED and fences its volume (#blocklisted).
   */
  fenceGateway(group: number): Promise<GatewayFenceResult> {
    return this.#oneGatewayOp(() => {
      this.#checkFence('fence gateway');
      return this.#image.gatewayFence(this.#gatewaysObject, `group.${group}`);
    });
  }

  /** The addon runs one gateway operation at a time (it has one thread for them): later ones wait their turn. */
  #oneGatewayOp<T>(op: () => Promise<T>): Promise<T> {
    const run = this.#gatewayTurn.then(() => this.#gate.run(op));
    this.#gatewayTurn = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  get size(): number {
    return this.#size;
  }

  onResize(listener: (() => void) | null): void {
    this.#image.onChange(listener);
  }

  read(buf: Buffer, offset: number): Promise<void> {
    // No async wrapper of our own: the gate's promise and librbd's are the only two per I/O.
    return this.#gate.run(() => {
      this.#checkFence('read');
      checkRange(this.#what, 'read', offset, buf.length, this.#size);
      return buf.length > 0 ? this.#image.read(buf, offset) : Promise.resolve();
    });
  }

  write(buf: Buffer, offset: number, opts?: WriteOptions): Promise<void> {
    if (opts?.fua !== true) {
      return this.#gate.run(() => {
        this.#checkWritable('write');
        checkRange(this.#what, 'write', offset, buf.length, this.#size);
        return buf.length > 0 ? this.#image.write(buf, offset) : Promise.resolve();
      });
    }
    return this.#gate.run(async () => {
      this.#checkWritable('write');
      checkRange(this.#what, 'write', offset, buf.length, this.#size);
      if (buf.length > 0) await this.#image.write(buf, offset);
      // Without the client cache an acknowledged write is already on the OSDs; the
      // flush keeps FUA honest should a ceph.conf turn rbd_cache back on.
      await this.#image.flush();
    });
  }

  flush(): Promise<void> {
    return this.#gate.run(() => {
      this.#checkFence('flush');
      return this.#image.flush();
    });
  }

  discard(offset: number, length: number): Promise<void> {
    return this.#gate.run(async () => {
      this.#checkWritable('discard');
      checkRange(this.#what, 'discard', offset, length, this.#size);
      if (length > 0) await this.#image.writeZeroes(offset, length);
    });
  }

  writeZeroes(offset: number, length: number, _unmap: boolean): Promise<void> {
    return this.#gate.run(async () => {
      this.#checkWritable('write zeroes');
      checkRange(this.#what, 'write zeroes', offset, length, this.#size);
      // Deallocating or not, librbd's write-zeroes is the one call (see canDiscard).
      if (length > 0) await this.#image.writeZeroes(offset, length);
    });
  }

  writeSame(pattern: Buffer, offset: number, length: number, opts?: WriteOptions): Promise<void> {
    return this.#gate.run(async () => {
      this.#checkWritable('write same');
      checkRange(this.#what, 'write same', offset, length, this.#size);
      if (pattern.length === 0 || length % pattern.length !== 0) {
        throw backendError('EINVAL', `${this.#what}: write same of ${length} bytes is not a whole number of ${pattern.length}-byte patterns`);
      }
      if (length > 0) await this.#image.writeSame(pattern, offset, length);
      if (opts?.fua === true) await this.#image.flush();
    });
  }

  compareAndWrite(compare: Buffer, data: Buffer, offset: number, opts?: WriteOptions): Promise<void> {
    return this.#gate.run(async () => {
      this.#checkWritable('compare and write');
      checkRange(this.#what, 'compare and write', offset, data.length, this.#size);
      if (compare.length !== data.length) throw backendError('EINVAL', `${this.#what}: compare and write buffers differ in length`);
      await this.#image.compareAndWrite(compare, data, offset);
      if (opts?.fua === true) await this.#image.flush();
    });
  }

  /** librbd's allocation map (rbd_diff_iterate2) is not asked: every block reports as mapped. */
  extent(offset: number): Promise<Extent> {
    return this.#gate.run(async () => {
      this.#checkFence('extent');
      checkRange(this.#what, 'extent', offset, 0, this.#size);
      return { offset, length: this.#size - offset, mapped: true };
    });
  }

  refreshSize(): Promise<number> {
    return this.#gate.run(async () => {
      this.#size = this.#image.size();
      return this.#size;
    });
  }

  async close(): Promise<void> {
    if (!(await this.#gate.close())) return;
    await this.#image.close();
  }

  #checkWritable(op: string): void {
    this.#checkFence(op);
    if (this.readOnly) throw backendError('EROFS', `${this.#what}: ${op} refused: the volume is read-only`);
  }
}
