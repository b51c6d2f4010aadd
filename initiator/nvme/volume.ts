// One namespace of an NVMe/TCP session as the library's block API
// (initiator/block-device.ts BlockDevice, the same calls as the SCSI Volume
// of initiator/volume.ts): Read, Write (FUA), Flush, Dataset Management
// deallocate for discard, Write Zeroes (NVM Command Set 1.0 §3.2.2-§3.2.9),
// split at the session's largest transfer and at NLB's 65,536 blocks.
// Offsets and lengths are bytes; anything not whole blocks inside the
// namespace rejects with a RangeError before a command is sent, as Volume does.
import { buildSqe, IoOpcode } from '../../protocol/nvme/command.js';
import type { NamespaceInfo } from '../../protocol/nvme/identify.js';
import { abortable } from '../abort.js';
import type { BlockDevice } from '../block-device.js';
import { asBuffer } from '../bytes.js';
import { RblkError } from '../errors.js';
import { RegisteredBuffer } from '../registered-buffer.js';
import type { Command } from './queue.js';
import { NvmeReservations } from './reservations.js';
import type { Describe, NvmeSession } from './session.js';

/** NLB is 16 bits, 0's based (NVM 1.0 §3.2.4 CDW12): 65,536 blocks per command at most. */
const MAX_NLB = 65536;
/** Dataset Management takes up to 256 ranges (NR, CDW10 bits 7:0, 0's based). */
const MAX_DSM_RANGES = 256;
/** A range's length field is 32 bits of blocks (NVM 1.0 Figure "Dataset Management – Range Definition"). */
const MAX_DSM_BLOCKS = 0xffffffff;

export interface NvmeIoOptions {
  /**
   * Aborting rejects at once with an AbortError, as for the SCSI Volume
   * (docs/initiator.md "Cancelling I/O"): commands already sent run to their
   * end and their completion is dropped, so an aborted write may still land;
   * a buffer passed to read() is filled only if the read succeeds before the abort.
   */
  signal?: AbortSignal;
}

export interface NvmeWriteOptions extends NvmeIoOptions {
  /** Force Unit Access (CDW12 bit 30, NVM 1.0 §3.2.6): durable before it resolves. */
  fua?: boolean;
}

export class NvmeVolume implements BlockDevice {
  readonly nsid: number;
  /** `nsid<N>`: NVMe names no volumes. */
  readonly name: string;
  readonly blockSize: number;
  readonly size: number;
  readonly readOnly: boolean;
  /** Thin provisioned and deallocated blocks read as zeroes (NSFEAT bit 0, DLFEAT 001b). */
  readonly canDiscard: boolean;
  /** The namespace's NGUID (Identify Namespace 104-119), hex. */
  readonly nguid: string;
  /** The namespace's UUID from its descriptor list (CNS 03h, NIDT 3h), when it has one. */
  readonly uuid: string | null;
  /** Reservation Register/Acquire/Release/Report with the SCSI volume's calls (reservations.ts). */
  readonly reservations: NvmeReservations;
  #closed = false;

  /** @internal Built by NvmeSession.open. */
  constructor(
    private readonly session: NvmeSession,
    nsid: number,
    ns: NamespaceInfo,
    ids: { uuid?: string } = {},
  ) {
    this.nsid = nsid;
    this.name = `nsid${nsid}`;
    this.blockSize = ns.blockSize;
    this.size = ns.blocks * ns.blockSize;
    this.readOnly = ns.writeProtected;
    this.canDiscard = ns.thin && ns.deallocatedReadsZeroes;
    this.nguid = ns.nguid;
    this.uuid = ids.uuid ?? null;
    this.reservations = new NvmeReservations((cmd, what) => this.command(cmd, what), nsid, session.hostid);
  }

  get maxTransfer(): number {
    const bs = this.blockSize;
    return Math.max(bs, Math.floor(Math.min(this.session.maxTransfer, MAX_NLB * bs) / bs) * bs);
  }

  #what(op: string, offset: number, length: number): string {
    return `${op} [${offset}, +${length}) on namespace ${this.nsid}`;
  }

  #check(op: string, offset: number, length: number): void {
    const bs = this.blockSize;
    if (this.#closed) throw new RblkError('INVALID', `${op}: namespace ${this.nsid} was closed`);
    if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`${op}: offset ${offset} is not a non-negative integer`);
    if (!Number.isSafeInteger(length) || length < 0) throw new RangeError(`${op}: length ${length} is not a non-negative integer`);
    if (offset % bs !== 0) throw new RangeError(`${op}: offset ${offset} is not a multiple of the ${bs}-byte block size`);
    if (length % bs !== 0) throw new RangeError(`${op}: length ${length} is not a multiple of the ${bs}-byte block size`);
    if (offset + length > this.size) throw new RangeError(`${op}: [${offset}, +${length}) runs past the end of namespace ${this.nsid} (${this.size} bytes)`);
  }

  /** Read/Write/Write Zeroes SQE: SLBA CDW10-11, NLB CDW12 15:0 (0's based), flags in CDW12 (NVM 1.0 §3.2.4, §3.2.6, §3.2.9). */
  #rw(opcode: number, offset: number, length: number, cdw12Flags = 0): Buffer {
    const lba = offset / this.blockSize;
    const nlb = length / this.blockSize - 1;
    // Written directly rather than through buildSqe: this runs once per I/O. PSDT 10b (SGL, NVMe-oF 1.1 §2.1); the queue sets CID and SGL1.
    // From Node's pool, zeroed: Buffer.alloc(64) made a new ArrayBuffer per I/O.
    const b = Buffer.allocUnsafe(64).fill(0);
    b[0] = opcode;
    b[1] = 0x80;
    b.writeUInt32LE(this.nsid, 4);
    b.writeUInt32LE(lba % 2 ** 32, 40);
    b.writeUInt32LE(Math.floor(lba / 2 ** 32), 44);
    b.writeUInt32LE(((nlb & 0xffff) | cdw12Flags) >>> 0, 48);
    return b;
  }

  #pieces(offset: number, length: number, max: number): { at: number; length: number }[] {
    const out: { at: number; length: number }[] = [];
    for (let at = 0; at < length; at += max) out.push({ at: offset + at, length: Math.min(max, length - at) });
    return out;
  }

  /** @internal One command on this namespace through the session's recovery (session.ts run). */
  async command(cmd: Command, what: Describe): Promise<Buffer | null> {
    return (await this.session.run(this.nsid, cmd, what)).data;
  }

  /**
   * The registered buffer `buf` lies in, if any; BUFFER_RELEASED when it was
   * released (its views do not read as empty over NVMe/TCP, so the check is
   * the registration's, as the SCSI volume's live() makes it).
   */
  #registered(op: string, offset: number, buf: Buffer): RegisteredBuffer | undefined {
    const reg = RegisteredBuffer.find(buf);
    if (reg === undefined) return undefined;
    if (!reg.registered.valid) throw new RblkError('BUFFER_RELEASED', `${this.#what(op, offset, buf.length > 0 ? buf.length : reg.registered.length)}: the registered buffer was released; allocate a new one`);
    return reg.registered;
  }

  /**
   * Reads length bytes at offset, or fills the given buffer (a Buffer,
   * Uint8Array, or registered buffer from allocate()) from offset. The data
   * lands in the caller's buffer straight from the socket (queue.ts
   * c2hDataFrom). With a signal, an ordinary buffer is filled only when the
   * read succeeds (a fresh one is read and copied); registered memory is
   * read into directly even then, as on the SCSI volume.
   */
  async read(offset: number, target: number | Uint8Array | RegisteredBuffer, opts: NvmeIoOptions = {}): Promise<Buffer> {
    const into = typeof target === 'number' ? null : target instanceof RegisteredBuffer ? target.buffer : asBuffer(target, 'read: the second argument', 'a length, or a Buffer, Uint8Array or RegisteredBuffer to fill');
    const reg = into === null ? undefined : this.#registered('read', offset, into);
    const length = into === null ? (target as number) : into.length;
    this.#check('read', offset, length);
    const signal = opts.signal;
    if (signal === undefined && length <= this.maxTransfer) {
      // One command, no signal (nearly every read): straight to the session, without #read's closures and promise.
      const out = into ?? Buffer.allocUnsafe(length);
      await this.session.run(this.nsid, { sqe: this.#rw(IoOpcode.Read, offset, length), readLength: length, readInto: out, registered: reg }, () => this.#what('read', offset, length));
      return out;
    }
    if (signal === undefined || reg !== undefined) {
      const read = (): Promise<Buffer> => this.#read(offset, length, into ?? Buffer.allocUnsafe(length), reg);
      return signal === undefined ? read() : abortable(signal, this.#what('read', offset, length), read);
    }
    return abortable(signal, this.#what('read', offset, length), async () => {
      const fresh = await this.#read(offset, length, Buffer.allocUnsafe(length), undefined);
      if (into === null) return fresh;
      if (!signal.aborted) fresh.copy(into);
      return into;
    });
  }

  async #read(offset: number, length: number, out: Buffer, registered: RegisteredBuffer | undefined): Promise<Buffer> {
    // C2HData lands in `out` directly (queue.ts c2hDataFrom): no copy after.
    const one = (at: number, n: number): Promise<Buffer | null> =>
      this.command({ sqe: this.#rw(IoOpcode.Read, at, n), readLength: n, readInto: out.subarray(at - offset, at - offset + n), registered }, () => this.#what('read', at, n));
    if (length <= this.maxTransfer) await one(offset, length);
    else await Promise.all(this.#pieces(offset, length, this.maxTransfer).map((p) => one(p.at, p.length)));
    return out;
  }

  async readInto(offset: number, into: Uint8Array, opts: NvmeIoOptions = {}): Promise<void> {
    await this.read(offset, into, opts);
  }

  /** Memory for registered-buffer I/O (NvmeSession.allocate): the same call as the SCSI volume's. */
  allocate(length: number): RegisteredBuffer {
    return this.session.allocate(length);
  }

  /**
   * Writes data (a Buffer, Uint8Array or registered buffer) at offset; with
   * fua, each command is durable before it completes. The bytes go from the
   * caller's buffer to the socket, in the capsule or as H2CData, uncopied;
   * change them only after the write resolves.
   */
  async write(offset: number, data: Uint8Array | RegisteredBuffer, opts: NvmeWriteOptions = {}): Promise<void> {
    const buf = data instanceof RegisteredBuffer ? data.buffer : asBuffer(data, 'write: the data', 'a Buffer, Uint8Array or RegisteredBuffer');
    const registered = this.#registered('write', offset, buf);
    this.#check('write', offset, buf.length);
    if (this.readOnly) throw new RblkError('WRITE_PROTECTED', `${this.#what('write', offset, buf.length)}: the namespace is write protected (NSATTR bit 0)`);
    const fua = opts.fua === true ? 1 << 30 : 0;
    await abortable(opts.signal, this.#what('write', offset, buf.length), async () => {
      await Promise.all(
        this.#pieces(offset, buf.length, this.maxTransfer).map((p) =>
          this.command({ sqe: this.#rw(IoOpcode.Write, p.at, p.length, fua), write: buf.subarray(p.at - offset, p.at - offset + p.length), registered }, () => this.#what('write', p.at, p.length)),
        ),
      );
    });
  }

  /** Flush (NVM 1.0 §3.2.2): every completed write of this namespace durable. */
  async flush(opts: NvmeIoOptions = {}): Promise<void> {
    if (this.#closed) throw new RblkError('INVALID', `flush: namespace ${this.nsid} was closed`);
    const what = `flush of namespace ${this.nsid}`;
    await abortable(opts.signal, what, () => this.command({ sqe: buildSqe({ opcode: IoOpcode.Flush, cid: 0, nsid: this.nsid }) }, what));
  }

  /** Dataset Management with AD (deallocate, NVM 1.0 §3.2.3): advisory; on a thin namespace the range then reads as zeroes. */
  async discard(offset: number, length: number, opts: NvmeIoOptions = {}): Promise<void> {
    this.#check('discard', offset, length);
    if (length === 0) return;
    await abortable(opts.signal, this.#what('discard', offset, length), () => this.#discard(offset, length));
  }

  async #discard(offset: number, length: number): Promise<void> {
    const bs = this.blockSize;
    const ranges = this.#pieces(offset, length, MAX_DSM_BLOCKS * bs - ((MAX_DSM_BLOCKS * bs) % bs));
    for (let i = 0; i < ranges.length; i += MAX_DSM_RANGES) {
      const batch = ranges.slice(i, i + MAX_DSM_RANGES);
      // Range: context attributes 0-3, length in blocks 4-7, starting LBA 8-15.
      const data = Buffer.alloc(16 * batch.length);
      batch.forEach((r, k) => {
        data.writeUInt32LE(r.length / bs, 16 * k + 4);
        data.writeBigUInt64LE(BigInt(r.at / bs), 16 * k + 8);
      });
      const sqe = buildSqe({ opcode: IoOpcode.DatasetManagement, cid: 0, nsid: this.nsid, cdw: { 10: batch.length - 1, 11: 1 << 2 } });
      await this.command({ sqe, write: data }, this.#what('discard', offset, length));
    }
  }

  /** Write Zeroes (NVM 1.0 §3.2.9); unmap sets DEAC (CDW12 bit 25), letting a thin namespace deallocate. */
  async writeZeroes(offset: number, length: number, opts: NvmeIoOptions & { unmap?: boolean; fua?: boolean } = {}): Promise<void> {
    this.#check('writeZeroes', offset, length);
    const flags = (opts.unmap === true ? 1 << 25 : 0) | (opts.fua === true ? 1 << 30 : 0);
    await abortable(opts.signal, this.#what('writeZeroes', offset, length), async () => {
      await Promise.all(
        this.#pieces(offset, length, MAX_NLB * this.blockSize).map((p) =>
          this.command({ sqe: this.#rw(IoOpcode.WriteZeroes, p.at, p.length, flags) }, this.#what('writeZeroes', p.at, p.length)),
        ),
      );
    });
  }

  /** Forgets the namespace; the session stays open. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.session.forget(this);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.close();
  }
}
