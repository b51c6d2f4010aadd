// One volume of a session as an async block device: byte offsets in, SBC
// commands out (SBC-4 5.x), split at the largest transfer the session and the
// volume's Block Limits allow. Ordinary Buffers are copied through the
// connection's registered I/O pool (or sent in the capsule when small);
// buffers from session.allocate() go to the target as descriptors.
import { EventEmitter } from 'node:events';
import * as cdb from '../protocol/scsi/cdb.js';
import { parseLbaStatus } from '../protocol/scsi/lba-status.js';
import { ProvisioningStatus } from '../protocol/scsi/opcodes.js';
import { CAPACITY_DATA_HAS_CHANGED } from '../protocol/scsi/sense-codes.js';
import { senseIs, type Sense } from '../protocol/scsi/sense.js';
import { abortable } from './abort.js';
import type { AllocationExtent, BlockDevice } from './block-device.js';
import { asBuffer } from './bytes.js';
import { readCapacity, type Probe, type RunCommand, type VolumeInfo, type VolumeLimits } from './discovery.js';
import { RblkError } from './errors.js';
import type { FastIo, FastIoOwner } from './fast-io.js';
import { RegisteredBuffer } from './registered-buffer.js';
import { Reservations } from './reservations.js';
import type { DataIn, DataOut, ScsiRequest, ScsiResponse } from './scsi-request.js';
import type { AttentionListener, VolumeHost } from './volume-host.js';

export interface VolumeEvents {
  /** The capacity changed (a CAPACITY DATA HAS CHANGED unit attention, or capacity()). */
  resize: [size: number, previous: number];
  /** A unit attention on this volume's LUN was absorbed (SAM-5 5.14). */
  unitAttention: [sense: Sense];
}

export interface IoOptions {
  /**
   * Aborting rejects the operation at once with an AbortError (`.code`
   * 'ABORT_ERR'); aborted before the call, nothing is sent. A command
   * already handed to the session is not withdrawn: it runs at the target
   * and its completion is discarded, so an aborted write may still land
   * (docs/initiator.md "Cancelling I/O").
   */
  signal?: AbortSignal;
}

export interface WriteOptions extends IoOptions {
  /** Force Unit Access (SBC-4 5.40): durable on the target's medium before it resolves. */
  fua?: boolean;
}

export interface WriteZeroesOptions extends IoOptions {
  /** Deallocate as well, where the volume is thin (WRITE SAME(16) with UNMAP, SBC-4 5.49). */
  unmap?: boolean;
}

/**
 * A READ or WRITE of whole blocks: its CDB is built only if the JavaScript
 * path sends it, and its name only if an error quotes it (both cost per I/O).
 * `rw` lets the native queue send it instead (scsi-request.ts).
 */
class ReadWriteRequest implements ScsiRequest {
  readonly lun: number;
  readonly idempotent = true;
  readonly rw: { write: boolean; fua: boolean; lba: number; blocks: number };
  #cdb: Buffer | null = null;

  constructor(
    private readonly volume: Volume,
    write: boolean,
    private readonly offset: number,
    private readonly length: number,
    fua: boolean,
    readonly dataIn: DataIn | undefined,
    readonly dataOut: DataOut | undefined,
  ) {
    this.lun = volume.lun;
    const bs = volume.blockSize;
    this.rw = { write, fua, lba: offset / bs, blocks: length / bs };
  }

  get cdb(): Buffer {
    const r = this.rw;
    this.#cdb ??= r.write ? cdb.write(r.lba, r.blocks, { fua: r.fua }) : cdb.read(r.lba, r.blocks);
    return this.#cdb;
  }

  get what(): string {
    return this.volume.what(this.rw.write ? 'write' : 'read', this.offset, this.length);
  }
}

interface Piece {
  /** Offset within the caller's range. */
  at: number;
  length: number;
}

const MAX_U32 = 0xffffffff;
/** The options of a call that passes none: no object per I/O. */
const NO_OPTIONS: WriteOptions = Object.freeze({});
/** Descriptors asked for per GET LBA STATUS: an 8-byte header and 16 bytes each (SBC-4 5.8.2). */
const LBA_STATUS_DESCRIPTORS = 64;
/** UNMAP's parameter list length is 16 bits: an 8-byte header and 16 bytes per range (SBC-4 5.32.2). */
const MAX_UNMAP_RANGES_PER_LIST = Math.floor((0xffff - 8) / 16);

/**
 * A volume: implements {@link BlockDevice}, and adds zero-copy I/O, COMPARE AND
 * WRITE, persistent reservations and capacity refresh. Get one from
 * `session.open()`. Offsets and lengths are bytes, multiples of blockSize,
 * inside the volume; anything else rejects with a RangeError before a command
 * is sent.
 */
export class Volume extends EventEmitter<VolumeEvents> implements BlockDevice, AttentionListener, FastIoOwner {
  /** The volume's logical unit number at the target. */
  readonly lun: number;
  /** The name rblkd exports it under. */
  readonly name: string;
  /** Logical block size: 512 or 4096. */
  readonly blockSize: number;
  /** discard() deallocates (the volume is thin provisioned). */
  readonly canDiscard: boolean;
  /** Unit serial number (VPD 80h). */
  readonly serial: string;
  /** The volume's world-wide name, `naa.<hex>`. */
  readonly id: string;
  /** PERSISTENT RESERVE IN and OUT on this volume. */
  readonly reservations: Reservations;
  #size: number;
  readonly #readOnly: boolean;
  readonly #limits: VolumeLimits;
  readonly #info: VolumeInfo;
  readonly #session: VolumeHost;
  readonly #run: RunCommand;
  #unwatch: (() => void) | null;

  /** @internal Built by Session.open. */
  constructor(session: VolumeHost, probe: Probe) {
    super();
    const i = probe.info;
    this.#session = session;
    this.#run = (r: ScsiRequest): Promise<ScsiResponse> => session.command(r);
    this.lun = i.lun;
    this.name = i.name;
    this.blockSize = i.blockSize;
    this.canDiscard = i.thin;
    this.serial = i.serial;
    this.id = i.id;
    this.#size = i.size;
    this.#readOnly = i.readOnly;
    this.#limits = probe.limits;
    this.#info = i;
    this.reservations = new Reservations(this.#run, this.lun, this.name);
    this.#unwatch = session.watch(this.lun, this);
  }

  /** Bytes, as of the last READ CAPACITY (refreshed on a capacity-changed unit attention). */
  get size(): number {
    return this.#size;
  }

  /** The target refuses writes from this initiator (a read-only volume, or read-only access). */
  get readOnly(): boolean {
    return this.#readOnly;
  }

  /** The largest piece one command carries; larger I/O is split into pieces of this size. */
  get maxTransfer(): number {
    const bs = this.blockSize;
    const byLimits = this.#limits.maxTransferBlocks > 0 ? this.#limits.maxTransferBlocks * bs : Infinity;
    return Math.max(bs, Math.floor(Math.min(this.#session.maxTransfer, byLimits) / bs) * bs);
  }

  /** What `session.volumes()` reported for this volume, with the current size. */
  get info(): VolumeInfo {
    return { ...this.#info, size: this.#size, readOnly: this.#readOnly };
  }

  private check(op: string, offset: number, length: number): void {
    const bs = this.blockSize;
    if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`${op}: offset ${offset} is not a non-negative integer`);
    if (!Number.isSafeInteger(length) || length < 0) throw new RangeError(`${op}: length ${length} is not a non-negative integer`);
    if (offset % bs !== 0) throw new RangeError(`${op}: offset ${offset} is not a multiple of the ${bs}-byte block size`);
    if (length % bs !== 0) throw new RangeError(`${op}: length ${length} is not a multiple of the ${bs}-byte block size`);
    if (offset + length > this.#size) {
      throw new RangeError(`${op}: [${offset}, +${length}) runs past the end of volume ${this.name} (${this.#size} bytes)`);
    }
  }

  /**
   * A released registered buffer reads as empty, so without this a read into
   * it or a write from it would be a zero-length success: the caller's bytes
   * silently not written (docs/initiator.md "Two data paths").
   */
  private live(op: string, offset: number, buf: Buffer, reg: { registered: RegisteredBuffer } | undefined): void {
    if (reg === undefined || reg.registered.valid) return;
    // A detached view has lost its length too: name the registration's.
    const length = buf.length > 0 ? buf.length : reg.registered.length;
    throw new RblkError('BUFFER_RELEASED', `${this.what(op, offset, length)}: the registered buffer was released; allocate a new one`);
  }

  private pieces(length: number, max: number): Piece[] {
    const out: Piece[] = [];
    for (let at = 0; at < length; at += max) out.push({ at, length: Math.min(max, length - at) });
    return out;
  }

  /** @internal The general path's request for a command of the common read and write that did not end plainly. */
  requestFor(io: FastIo): ReadWriteRequest {
    const data = { kind: 'registered', buffer: io.reg!, offset: io.regOffset, length: io.length } as const;
    return new ReadWriteRequest(this, io.write, io.offset, io.length, io.fua, io.write ? undefined : data, io.write ? data : undefined);
  }

  /** @internal */
  what(op: string, offset: number, length: number): string {
    return `${op} [${offset}, +${length}) on volume ${this.name}`;
  }

  /**
   * Reads `length` bytes at `offset` into a new Buffer, or fills the given
   * Buffer or Uint8Array (or registered buffer) from `offset` and resolves
   * with a Buffer view of it. Memory from session.allocate() is filled by the
   * target directly (zero-copy). With a signal, an ordinary buffer is filled
   * only when the read succeeds, so a completion after an abort never
   * writes into it; registered memory the target writes directly, even then.
   */
  read(offset: number, target: number | Uint8Array | RegisteredBuffer, opts: IoOptions = NO_OPTIONS): Promise<Buffer> {
    // Not async, so that the common read (readNow) costs one promise; what is thrown rejects, as before.
    try {
      return this.readOrAbortable(offset, target, opts);
    } catch (e) {
      return Promise.reject(e as Error);
    }
  }

  private readOrAbortable(offset: number, target: number | Uint8Array | RegisteredBuffer, opts: IoOptions): Promise<Buffer> {
    const t = typeof target === 'number' || target instanceof RegisteredBuffer ? target : asBuffer(target, 'read: the second argument', 'a length, or a Buffer, Uint8Array or RegisteredBuffer to fill');
    const signal = opts.signal;
    if (signal === undefined) return this.readNow(offset, t);
    const what = this.what('read', offset, typeof t === 'number' ? t : t.length);
    if (typeof t !== 'number' && !(t instanceof RegisteredBuffer) && RegisteredBuffer.find(t) === undefined) {
      return abortable(signal, what, async () => {
        const data = await this.readNow(offset, t.length);
        if (!signal.aborted) data.copy(t);
        return t;
      });
    }
    return abortable(signal, what, () => this.readNow(offset, t));
  }

  private readNow(offset: number, target: number | Buffer | RegisteredBuffer): Promise<Buffer> {
    // The common read (fast-io.ts): registered memory, a whole buffer or a view of one, that fits one command.
    if (typeof target !== 'number') {
      const whole = target instanceof RegisteredBuffer;
      const into = whole ? target.buffer : target;
      const found = whole ? undefined : RegisteredBuffer.find(target);
      const reg = whole ? target : found?.registered;
      if (reg?.valid === true) {
        const length = into.length;
        this.check('read', offset, length);
        if (length <= this.maxTransfer && length > 0) {
          const p = this.#session.fastIo(this, false, false, offset, length, reg, found?.offset ?? 0, into) as Promise<Buffer> | null;
          if (p !== null) return p;
        }
      }
    }
    return this.readGeneral(offset, target);
  }

  private async readGeneral(offset: number, target: number | Buffer | RegisteredBuffer): Promise<Buffer> {
    const into = typeof target === 'number' ? null : target instanceof RegisteredBuffer ? target.buffer : target;
    const reg = into === null ? undefined : RegisteredBuffer.find(into);
    if (into !== null) this.live('read', offset, into, reg);
    const length = into === null ? (target as number) : into.length;
    this.check('read', offset, length);
    // Not zero-filled: every byte is overwritten, or the read throws (a short
    // transfer is an IO_ERROR below) and the buffer is never returned.
    const out = into ?? Buffer.allocUnsafe(length);
    const max = this.maxTransfer;
    if (length <= max && length > 0) {
      // One command (the common case): no piece list, no Promise.all.
      const dataIn: DataIn = reg ? { kind: 'registered', buffer: reg.registered, offset: reg.offset, length } : { kind: 'bytes', into: out };
      const r = await this.#run(new ReadWriteRequest(this, false, offset, length, false, dataIn, undefined));
      if (r.dataIn !== length) throw new RblkError('IO_ERROR', `${this.what('read', offset, length)}: the target returned ${r.dataIn} of ${length} bytes`);
      return out;
    }
    await Promise.all(
      this.pieces(length, this.maxTransfer).map(async (p) => {
        const off = offset + p.at;
        const dataIn: DataIn = reg
          ? { kind: 'registered', buffer: reg.registered, offset: reg.offset + p.at, length: p.length }
          : { kind: 'bytes', into: out.subarray(p.at, p.at + p.length) };
        const what = this.what('read', off, p.length);
        const r = await this.#run(new ReadWriteRequest(this, false, off, p.length, false, dataIn, undefined));
        if (r.dataIn !== p.length) throw new RblkError('IO_ERROR', `${what}: the target returned ${r.dataIn} of ${p.length} bytes`);
      }),
    );
    return out;
  }

  /** BlockDevice.readInto: read() into the given buffer (zero-copy when it lies in allocate()d memory). */
  async readInto(offset: number, into: Uint8Array, opts: IoOptions = {}): Promise<void> {
    await this.read(offset, into, opts);
  }

  /**
   * Registered memory from the session (session.allocate()) for zero-copy
   * I/O; it lives until released, across reconnects (see RegisteredBuffer).
   */
  allocate(length: number): RegisteredBuffer {
    return this.#session.allocate(length);
  }

  /**
   * Writes `data` (a Buffer, Uint8Array or registered buffer) at `offset`.
   * With fua, each piece is durable before it completes. Memory from
   * session.allocate() is read by the target directly (zero-copy); other
   * bytes are copied, or sent in the capsule.
   */
  write(offset: number, data: Uint8Array | RegisteredBuffer, opts: WriteOptions = NO_OPTIONS): Promise<void> {
    // Not async, so that the common write (writeNow) costs one promise; what is thrown rejects, as before.
    try {
      const d = data instanceof RegisteredBuffer ? data : asBuffer(data, 'write: data');
      if (opts.signal === undefined) return this.writeNow(offset, d, opts);
      return abortable(opts.signal, this.what('write', offset, d.length), () => this.writeNow(offset, d, opts));
    } catch (e) {
      return Promise.reject(e as Error);
    }
  }

  private writeNow(offset: number, data: Buffer | RegisteredBuffer, opts: WriteOptions): Promise<void> {
    // The common write (fast-io.ts): registered memory, a whole buffer or a view of one, that fits one command.
    const whole = data instanceof RegisteredBuffer;
    const found = whole ? undefined : RegisteredBuffer.find(data);
    const reg = whole ? data : found?.registered;
    if (reg?.valid === true) {
      const length = whole ? data.buffer.length : data.length;
      this.check('write', offset, length);
      if (length <= this.maxTransfer && length > 0) {
        const p = this.#session.fastIo(this, true, opts.fua === true, offset, length, reg, found?.offset ?? 0, undefined) as Promise<undefined> | null;
        if (p !== null) return p;
      }
    }
    return this.writeGeneral(offset, data, opts);
  }

  private async writeGeneral(offset: number, data: Buffer | RegisteredBuffer, opts: WriteOptions): Promise<void> {
    const buf = data instanceof RegisteredBuffer ? data.buffer : data;
    const reg = RegisteredBuffer.find(buf);
    this.live('write', offset, buf, reg);
    this.check('write', offset, buf.length);
    const length = buf.length;
    if (length <= this.maxTransfer && length > 0) {
      const dataOut: DataOut = reg ? { kind: 'registered', buffer: reg.registered, offset: reg.offset, length } : { kind: 'bytes', data: buf };
      await this.#run(new ReadWriteRequest(this, true, offset, length, opts.fua === true, undefined, dataOut));
      return;
    }
    await Promise.all(
      this.pieces(buf.length, this.maxTransfer).map(async (p) => {
        const off = offset + p.at;
        const dataOut: DataOut = reg
          ? { kind: 'registered', buffer: reg.registered, offset: reg.offset + p.at, length: p.length }
          : { kind: 'bytes', data: buf.subarray(p.at, p.at + p.length) };
        await this.#run(new ReadWriteRequest(this, true, off, p.length, opts.fua === true, undefined, dataOut));
      }),
    );
  }

  /** Makes every completed write durable (SYNCHRONIZE CACHE(16), SBC-4 5.26). */
  async flush(opts: IoOptions = {}): Promise<void> {
    return abortable(opts.signal, `flush of volume ${this.name}`, () => this.flushNow());
  }

  private async flushNow(): Promise<void> {
    await this.#run({ lun: this.lun, cdb: cdb.synchronizeCache16(), idempotent: true, what: `flush of volume ${this.name}` });
  }

  /**
   * Deallocates the range (UNMAP, SBC-4 5.32); it then reads as zeroes. A
   * volume that is not thin answers NOT_SUPPORTED.
   */
  async discard(offset: number, length: number, opts: IoOptions = {}): Promise<void> {
    return abortable(opts.signal, this.what('discard', offset, length), () => this.discardNow(offset, length));
  }

  private async discardNow(offset: number, length: number): Promise<void> {
    this.check('discard', offset, length);
    const bs = this.blockSize;
    const perRange = Math.min(MAX_U32, this.#limits.maxUnmapBlocks || MAX_U32) * bs;
    const perList = Math.min(MAX_UNMAP_RANGES_PER_LIST, this.#limits.maxUnmapDescriptors || 256);
    const ranges = this.pieces(length, perRange);
    for (let i = 0; i < ranges.length; i += perList) {
      const group = ranges.slice(i, i + perList);
      const list = cdb.unmapParameterList(group.map((r) => ({ lba: (offset + r.at) / bs, blocks: r.length / bs })));
      const first = offset + group[0].at;
      const last = group[group.length - 1];
      await this.#run({
        lun: this.lun,
        cdb: cdb.unmap(list.length),
        dataOut: { kind: 'bytes', data: list },
        idempotent: true,
        what: this.what('discard', first, offset + last.at + last.length - first),
      });
    }
  }

  /**
   * Writes zeroes over the range with WRITE SAME(16) and NDOB (no data-out
   * buffer, SBC-4 5.49); with unmap, a thin volume deallocates instead.
   */
  async writeZeroes(offset: number, length: number, opts: WriteZeroesOptions = {}): Promise<void> {
    return abortable(opts.signal, this.what('writeZeroes', offset, length), () => this.writeZeroesNow(offset, length, opts));
  }

  private async writeZeroesNow(offset: number, length: number, opts: WriteZeroesOptions): Promise<void> {
    this.check('writeZeroes', offset, length);
    const bs = this.blockSize;
    const max = Math.min(MAX_U32, this.#limits.maxWriteSameBlocks || MAX_U32) * bs;
    for (const p of this.pieces(length, max)) {
      const off = offset + p.at;
      await this.#run({
        lun: this.lun,
        cdb: cdb.writeSame16(off / bs, p.length / bs, { ndob: true, unmap: opts.unmap }),
        idempotent: true,
        what: this.what('writeZeroes', off, p.length),
      });
    }
  }

  /**
   * The provisioning status of the blocks from `offset`, as runs in order:
   * one GET LBA STATUS (SBC-4 5.8), so the runs may end before `length`
   * (ask again from where they end), and never past it. A thick volume is
   * one mapped run. Resolves at least one run when length > 0.
   */
  async lbaStatus(offset: number, length: number, opts: IoOptions = {}): Promise<AllocationExtent[]> {
    return abortable(opts.signal, this.what('lbaStatus', offset, length), () => this.lbaStatusNow(offset, length));
  }

  private async lbaStatusNow(offset: number, length: number): Promise<AllocationExtent[]> {
    this.check('lbaStatus', offset, length);
    if (length === 0) return [];
    const bs = this.blockSize;
    const size = 8 + 16 * LBA_STATUS_DESCRIPTORS;
    const into = Buffer.alloc(size);
    const what = this.what('lbaStatus', offset, length);
    const r = await this.#run({ lun: this.lun, cdb: cdb.getLbaStatus(offset / bs, size), dataIn: { kind: 'bytes', into }, idempotent: true, what });
    const end = offset + length;
    const out: AllocationExtent[] = [];
    let at = offset;
    for (const d of parseLbaStatus(into.subarray(0, r.dataIn))) {
      const start = Number(d.lba) * bs;
      const stop = Math.min(end, start + d.blocks * bs);
      // Descriptors are in LBA order from the first one asked for; anything else ends the answer.
      if (start !== at || stop <= at) break;
      const status = d.status === ProvisioningStatus.DEALLOCATED ? 'deallocated' : d.status === ProvisioningStatus.ANCHORED ? 'anchored' : 'mapped';
      const last = out[out.length - 1];
      if (last !== undefined && last.status === status) last.length += stop - at;
      else out.push({ offset: at, length: stop - at, status });
      at = stop;
      if (at >= end) break;
    }
    if (out.length === 0) throw new RblkError('IO_ERROR', `${what}: the target's GET LBA STATUS data did not describe LBA ${offset / bs}`);
    return out;
  }

  /**
   * Atomically compares the range with `expected` and, only if every byte
   * matches, writes `data` (COMPARE AND WRITE, SBC-4 5.3). On a mismatch it
   * rejects with a MiscompareError whose `offset` is the first differing
   * byte's offset within `expected`, and nothing is written. The range must
   * fit the volume's COMPARE AND WRITE limit (VPD B0h); it is never split.
   */
  async compareAndWrite(offset: number, expected: Uint8Array, data: Uint8Array, opts: WriteOptions = {}): Promise<void> {
    const e = asBuffer(expected, 'compareAndWrite: expected', 'a Buffer or a Uint8Array');
    const d = asBuffer(data, 'compareAndWrite: data', 'a Buffer or a Uint8Array');
    return abortable(opts.signal, this.what('compareAndWrite', offset, d.length), () => this.compareAndWriteNow(offset, e, d, opts));
  }

  private async compareAndWriteNow(offset: number, expected: Buffer, data: Buffer, opts: WriteOptions): Promise<void> {
    if (expected.length !== data.length) throw new RangeError(`compareAndWrite: expected is ${expected.length} bytes and data ${data.length}; they must be equal`);
    this.check('compareAndWrite', offset, data.length);
    const blocks = data.length / this.blockSize;
    if (blocks === 0) return;
    const max = this.#limits.maxCompareAndWriteBlocks;
    if (blocks > max) throw new RangeError(`compareAndWrite: ${blocks} blocks exceed volume ${this.name}'s COMPARE AND WRITE limit of ${max} (VPD B0h)`);
    await this.#run({
      lun: this.lun,
      cdb: cdb.compareAndWrite(offset / this.blockSize, blocks, { fua: opts.fua }),
      dataOut: { kind: 'bytes', data: Buffer.concat([expected, data]) },
      // Sent twice, the second compare would fail against the first's write.
      idempotent: false,
      what: this.what('compareAndWrite', offset, data.length),
    });
  }

  /** Reads the capacity again (READ CAPACITY(16)); emits 'resize' when it changed. Resolves with the size. */
  async capacity(): Promise<number> {
    const { size } = await readCapacity(this.#run, this.lun);
    const previous = this.#size;
    if (size !== previous) {
      this.#size = size;
      this.emit('resize', size, previous);
    }
    return size;
  }

  /** @internal Called by the session for each unit attention on this LUN. */
  onUnitAttention(sense: Sense): void {
    this.emit('unitAttention', sense);
    // SBC-4 4.6: after 2A/09 the initiator re-reads the capacity.
    if (senseIs(sense, CAPACITY_DATA_HAS_CHANGED)) this.capacity().catch(() => undefined);
  }

  /** Stops listening for the LUN's unit attentions. The session stays open. */
  close(): void {
    this.#unwatch?.();
    this.#unwatch = null;
  }

  /** `await using vol = await session.open()`: close() when the scope ends. */
  async [Symbol.asyncDispose](): Promise<void> {
    this.close();
  }
}
