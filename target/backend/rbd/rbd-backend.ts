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
import type { Backend, BackendNotice, Extent, FastPathTarget, GatewayFenceResult, SharedRecord, StoreSnapshots, WriteOptions } from '../backend.js';
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
  #image: RbdImage;
  readonly #options: RbdOpenOptions;
  readonly #fastPathOn: boolean;
  readonly #what: string;
  readonly #gate: IoGate;
  readonly #pool: string;
  readonly #timeoutSeconds: number;
  #record: RbdRecord | undefined;
  #size: number;
  #fast: FastPathTarget | null;
  /** The target port group last published (publishGateway), published again by recover(). */
  #group: number | undefined;
  #resizeListener: (() => void) | null = null;
  #onFenced: (() => void) | null = null;
  #onFastPathChange: (() => void) | null = null;
  /** Old clients being closed after a recover(), awaited by close(). */
  readonly #retiring = new Set<Promise<void>>();
  /** Set once the cluster blocklisted this client: every operation fails with EBLOCKLISTED. */
  #fenced = false;
  #notices: BackendNotice[] = [];
  #gatewayTurn: Promise<void> = Promise.resolve();
  #onNotice: ((notice: BackendNotice) => void) | null = null;

  private constructor(image: RbdImage, what: string, options: RbdOpenOptions, fastPath: boolean) {
    this.#image = image;
    this.#options = options;
    this.#fastPathOn = fastPath;
    this.#what = what;
    this.readOnly = options.readOnly;
    this.#pool = `${options.pool}${options.namespace !== undefined && options.namespace !== '' ? ` (namespace ${options.namespace})` : ''}`;
    this.#timeoutSeconds = options.timeoutSeconds;
    this.#size = image.size();
    // A snapshot is another device than its image (VPD 83h): its own identity, and its own records.
    this.sharedIdentity = options.snapshot !== undefined ? `${image.id()}@${options.snapshot}` : image.id();
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

  onFastPathChange(listener: (() => void) | null): void {
    this.#onFastPathChange = listener;
  }

  /**
   * The native fast path's librbd request failed: EBLOCKLISTED is proof that
   * the cluster blocklisted this client (rblk_rbd tells the image too,
   * native/src/rbd/rbd-c-api.cc; whichever comes first fences, once).
   */
  fastPathFailed(code: string): void {
    if (code === EBLOCKLISTED && !this.#gate.closed) this.#blocklisted();
  }

  onFenced(listener: (() => void) | null): void {
    this.#onFenced = listener;
  }

  /**
   * After a blocklist: a new librados client and a new open of the image, its
   * address published under this gateway's group before anything runs on it,
   * and the volume unfenced. The caller (the daemon) has ended every
   * connection that could still hold a command from before the fence and let
   * the LU go idle, so nothing sent before the fence can reach the new client
   * (docs/backends.md "A fenced gateway comes back"). The old client is closed
   * once its last operation, refused by the OSDs, has come back. Resolves the
   * new client's address, or '' when no group is published.
   */
  recover(): Promise<string> {
    return this.#gate.run(async () => {
      if (!this.#fenced) return '';
      const next = await RbdImage.open(this.#options);
      let address = '';
      try {
        if (this.#group !== undefined) address = await next.gatewayPublish(this.#gatewaysObject, `group.${this.#group}`);
      } catch (e) {
        await next.close().catch(() => undefined);
        throw e;
      }
      const old = this.#image;
      old.onBlocklisted(null);
      old.onChange(null);
      this.#image = next;
      next.onBlocklisted(() => this.#blocklisted());
      next.onChange(this.#resizeListener);
      this.#fast = this.#fastPathOn ? { fd: -1, align: 1, rbd: next.fastTarget() } : null;
      this.#record?.moveTo(next);
      const sizeBefore = this.#size;
      this.#size = next.size();
      this.#fenced = false;
      // Sessions that logged in while fenced were refused the fast path; the new client's handle is theirs now.
      this.#onFastPathChange?.();
      const retired = this.#retire(old);
      this.#retiring.add(retired);
      void retired.finally(() => this.#retiring.delete(retired));
      // An `rbd resize` while fenced: the LU re-reads its capacity (CAPACITY DATA HAS CHANGED).
      if (this.#size !== sizeBefore) this.#resizeListener?.();
      return address;
    });
  }

  /** Closes a blocklisted client once its operations have all come back (they fail at once: EBLOCKLISTED). */
  async #retire(old: RbdImage): Promise<void> {
    const until = performance.now() + 2 * this.#timeoutSeconds * 1000;
    while (old.inFlight > 0 && performance.now() < until) await new Promise((r) => setTimeout(r, 50));
    await old.close().catch(() => undefined);
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
    // No session submits natively to the dead client any more: its commands come to JavaScript, which refuses them (NOT READY).
    this.#onFastPathChange?.();
    this.#notice({
      level: 'error',
      message:
        `${this.#what}: the Ceph cluster blocklisted this gateway (EBLOCKLISTED): another gateway fenced it for an initiator that ` +
        'failed over (FENCE GATEWAY), or another client broke its exclusive lock, most likely while this one was frozen or cut off. The OSDs refuse every write this gateway ' +
        'still held, and the volume is fenced: each command fails NOT READY 04/0C, which sends multipath initiators to another path. ' +
        'rblkd ends the connections that use the volume and serves it again through a new Ceph client once they are gone (docs/operations.md "A gateway blocklisted by Ceph")',
    });
    this.#onFenced?.();
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
   * Opens the image, first making it a clone of `parent` (an image of the
   * same pool and namespace, and its snapshot) when it does not exist yet:
   * YAML's clone_of (docs/operations.md "Snapshots and clones"). The parent
   * is opened for the clone alone and closed again; librbd protects its
   * snapshot first where the clone format needs it (native/src/rbd/rbd-snap.cc).
   */
  static async openClone(options: RbdOpenOptions, parent: { image: string; snapshot: string }, fastPath = true): Promise<RbdBackend> {
    try {
      return await RbdBackend.open(options, fastPath);
    } catch (e) {
      if ((e as { code?: unknown }).code !== 'ENOENT') throw e;
    }
    const ns = options.namespace !== undefined && options.namespace !== '' ? `${options.namespace}/` : '';
    const from = `${options.pool}/${ns}${parent.image}@${parent.snapshot}`;
    const { snapshot: _none, ...rest } = options;
    const p = await RbdImage.open({ ...rest, image: parent.image, readOnly: false }).catch((e: unknown) => {
      throw (e as { code?: unknown }).code === 'ENOENT' ? backendError('ENOENT', `clone_of ${from}: rbd image ${options.pool}/${ns}${parent.image} does not exist`) : e;
    });
    try {
      await p.snapClone(parent.snapshot, options.image);
    } catch (e) {
      const code = (e as { code?: unknown }).code;
      if (code === 'ENOENT') throw backendError('ENOENT', `clone_of ${from}: rbd image ${options.pool}/${ns}${parent.image} has no snapshot ${parent.snapshot}`);
      // Made meanwhile by another gateway (EEXIST): open it as it is.
      if (code !== 'EEXIST') throw e;
    } finally {
      await p.close().catch(() => undefined);
    }
    return RbdBackend.open(options, fastPath);
  }

  /**
   * librbd's table and this image's handle, for the native fast path to
   * submit READ and WRITE itself (docs/target.md "Fast path"). Null once
   * close() has begun, or when the volume's rbd.fast_path is false; the LU
   * revokes the fast path and waits for it before the close (as for a file).
   */
  get fastPathTarget(): FastPathTarget | null {
    // Fenced: the client is dead, and a connection must not keep its handle past recover().
    if (this.#gate.closed || this.#fenced) return null;
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
   * of the gateway that serves the image in that group (native/src/rbd/rbd-gateway.cc).
   */
  get #gatewaysObject(): string {
    return `rblk_gateways.${this.sharedIdentity.split('/').pop() ?? ''}`;
  }

  publishGateway(group: number): Promise<string> {
    return this.#oneGatewayOp(async () => {
      this.#checkFence('publish gateway');
      const address = await this.#image.gatewayPublish(this.#gatewaysObject, `group.${group}`);
      this.#group = group;
      return address;
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
  /**
   * librbd snapshots and clones (native/src/rbd/rbd-snap.cc), one at a time with
   * the gateway operations, whose thread they share. A clone is a new image
   * in the same pool and namespace.
   */
  readonly snapshots: StoreSnapshots = {
    create: (name) => this.#oneGatewayOp(() => (this.#checkFence('snapshot'), this.#image.snapCreate(name))),
    list: () =>
      this.#oneGatewayOp(async () => {
        this.#checkFence('list snapshots');
        return (await this.#image.snapList()).map((x) => ({ name: x.name, size: x.size, created: new Date(x.created * 1000).toISOString() }));
      }),
    remove: (name) => this.#oneGatewayOp(() => (this.#checkFence('remove snapshot'), this.#image.snapRemove(name))),
    clone: (name, child) =>
      this.#oneGatewayOp(async () => {
        this.#checkFence('clone');
        await this.#image.snapClone(name, child);
        const ns = this.#options.namespace;
        return `${this.#options.pool}/${ns !== undefined && ns !== '' ? `${ns}/` : ''}${child}`;
      }),
    flatten: () => this.#oneGatewayOp(() => (this.#checkWritable('flatten'), this.#image.flatten())),
  };

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
    this.#resizeListener = listener;
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
    await Promise.all(this.#retiring);
    await this.#image.close();
  }

  #checkWritable(op: string): void {
    this.#checkFence(op);
    if (this.readOnly) throw backendError('EROFS', `${this.#what}: ${op} refused: the volume is read-only`);
  }
}
