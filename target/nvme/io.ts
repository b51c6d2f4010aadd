// The NVM command set on a namespace (NVM Command Set Specification 1.0 §3):
// Read, Write (FUA), Flush, Write Zeroes, Dataset Management (deallocate),
// Compare, Verify. Each reaches storage through the volume's backend
// (target/backend/backend.ts) under the LU's range lock, beside the SCSI
// command set on the same volume; neither translates into the other
// (docs/nvme.md "Command sets side by side").
import { cdw, IoOpcode, Status, type NvmeStatus } from '../../protocol/nvme/command.js';
import { isMiscompare } from '../backend/backend.js';
import { initiatorNameOf, nexusKey, type Access, type LogicalUnit, type Nexus } from '../scsi/index.js';
import type { PrClass } from '../scsi/reservations/reservations.js';
import type { QosDirection } from '../scsi/qos-bucket.js';
import { acquireScratch, withScratch } from '../scsi/scratch.js';
import { prepareReservation, ResvOpcode } from './reservations.js';
import { statusForError, type NvmeIoKind } from './status.js';

export interface Namespace {
  readonly nsid: number;
  /** The volume's LUN, which the server's waits (ServedConnection.settled) name. */
  readonly lun: number;
  readonly lu: LogicalUnit;
  readonly access: Access;
}

export interface Completion {
  status: NvmeStatus;
  dw0?: number;
  dw1?: number;
  /** Controller-to-host data (C2HData). */
  data?: Buffer;
  /**
   * Gives `data`'s memory back (a pooled scratch slot): the connection calls
   * it once the data is written to the socket, or at once when it is not sent.
   */
  release?: () => void;
}

/** A command checked before its data moves: how much data and which way, and what runs it. */
export interface PreparedIo {
  /** Host-to-controller bytes the command needs (in-capsule or by R2T), or controller-to-host bytes it returns. */
  readonly length: number;
  readonly dir: 'h2c' | 'c2h' | 'none';
  run(data: Buffer | null): Promise<Completion>;
}

/** Stats classes as IoStats counts them (target/scsi/request/io-stats.ts): read, write, discard, flush, other. */
const CLS = { read: 0, write: 1, discard: 2, flush: 3, other: 4 } as const;

export interface IoContext {
  readonly nexus: Nexus;
  /** This queue's controller and its host (Reservation Report). */
  readonly cntlid: number;
  readonly hostid: Buffer;
  /** Largest data transfer, bytes (MDTS). */
  readonly maxIo: number;
  /** Counted per session (SessionIo.record). */
  record(cls: number, bytes: number, error: boolean): void;
}

const fail = (status: NvmeStatus): { status: NvmeStatus } => ({ status });

/** SLBA (CDW10-11) and NLB (CDW12 bits 15:0, 0's based) of Read/Write/Compare/Verify/Write Zeroes (NVM 1.0 §3.2.4 ff.). */
function lbaRange(sqe: Buffer, lu: LogicalUnit): { lba: number; blocks: number } | { status: NvmeStatus } {
  const blocks = (cdw(sqe, 12) & 0xffff) + 1;
  // SLBA as two words, not a BigInt per command: a high word of 2^21 or more is past any volume (2^53 blocks).
  const hi = sqe.readUInt32LE(44);
  if (hi >= 0x200000) return fail(Status.LbaOutOfRange);
  const lba = hi * 0x1_0000_0000 + sqe.readUInt32LE(40);
  if (lba + blocks > lu.blocks) return fail(Status.LbaOutOfRange);
  return { lba, blocks };
}

async function timed(lu: LogicalUnit, ctx: IoContext, cls: number, bytes: number, kind: NvmeIoKind, op: () => Promise<Completion>): Promise<Completion> {
  const t0 = performance.now();
  let c: Completion;
  try {
    c = await op();
  } catch (e) {
    c = { status: statusForError(kind, e) };
  }
  const error = c.status.sc !== 0 || c.status.sct !== 0;
  lu.stats.record(cls, error ? 0 : bytes, error, performance.now() - t0);
  ctx.record(cls, error ? 0 : bytes, error);
  return c;
}

const OK: Completion = { status: Status.Success };

/**
 * A store opened with O_DIRECT (the volume's `direct:`) needs the buffer's
 * address aligned as well (open(2), "O_DIRECT"), and neither capsule data nor
 * a plain Buffer is: such I/O goes through page-aligned scratch memory
 * (target/scsi/scratch.ts), as the iSCSI portal's goes through its aligned
 * buffers (target/iscsi/aligned-buffers.ts). fastPathTarget.align is the
 * alignment a descriptor backend needs, 1 when buffered.
 */
function needsAlignment(lu: LogicalUnit): boolean {
  return (lu.backend.fastPathTarget?.align ?? 1) > 1;
}

async function readBlocks(lu: LogicalUnit, length: number, offset: number): Promise<Buffer> {
  if (!needsAlignment(lu)) {
    const buf = Buffer.allocUnsafe(length);
    await lu.backend.read(buf, offset);
    return buf;
  }
  // A copy out of the scratch slot, for the callers that keep the data (Verify, Compare);
  // a Read sends the slot itself (readForSend).
  return withScratch(length, async (s) => {
    await lu.backend.read(s, offset);
    const out = Buffer.allocUnsafe(length);
    s.copy(out, 0, 0, length);
    return out;
  });
}

/**
 * A Read's data as its completion: on an O_DIRECT volume the page-aligned
 * scratch slot itself, released by the connection once its C2HData is
 * written, so nothing is allocated or copied per read. It used to be copied
 * out with Buffer.from(slot), which zero-filled a new buffer and copied
 * through the typed-array constructor: most of a 128 KiB read's CPU in rblkd
 * (docs/performance.md "The NVMe/TCP listener through the library's NVMe/TCP host").
 */
async function readForSend(lu: LogicalUnit, length: number, offset: number): Promise<Completion> {
  if (!needsAlignment(lu)) return { status: Status.Success, data: await readBlocks(lu, length, offset) };
  const slot = acquireScratch(length);
  try {
    await lu.backend.read(slot.buf, offset);
  } catch (e) {
    slot.release();
    throw e;
  }
  return { status: Status.Success, data: slot.buf, release: slot.release };
}

async function writeBlocks(lu: LogicalUnit, data: Buffer, offset: number, fua: boolean): Promise<void> {
  if (!needsAlignment(lu)) return lu.backend.write(data, offset, { fua });
  await withScratch(data.length, async (s) => {
    data.copy(s);
    await lu.backend.write(s, offset, { fua });
  });
}

/**
 * What the volume's shared state says before a command reaches its backend,
 * as the SCSI side asks it (target/scsi/scsi-command.ts): a gateway whose
 * port group cannot reach the medium, or that its store fenced out, answers
 * Asymmetric Access Inaccessible; a persistent reservation (or RESERVE(6))
 * held through the SCSI side keeps this host, which is never a registrant,
 * out as SPC-5 table 69 says, answered Reservation Conflict (Base 2.0 §8.19,
 * "Command Behavior in the Presence of a Reservation": Read, Compare, Verify
 * read; Write, Write Zeroes, Dataset Management write; Flush is allowed).
 */
function refusal(lu: LogicalUnit, ctx: IoContext, cls: PrClass): Completion | null | Promise<Completion | null> {
  if ((lu.portGroups !== undefined && !lu.portGroups.mediaAccess) || lu.backend.fenced === true) return { status: Status.AsymmetricAccessInaccessible };
  if (cls === 'exempt') return null;
  const r = lu.reservations;
  const conflict = (): Completion | null => (r.conflicts(nexusKey(ctx.nexus), cls, false) ? { status: Status.ReservationConflict } : null);
  // Decided at once when the reservation state is current, as it is but for a shared store catching up: no promise per command.
  if (r.current) return conflict();
  return r.whenCurrent().then((current) => (current ? conflict() : { status: Status.NamespaceNotReady }));
}

/** The prepared command, run only when refusal() lets it. */
function guarded(p: PreparedIo, lu: LogicalUnit, ctx: IoContext, cls: PrClass, qos: QosDirection | null): PreparedIo {
  const admitted = (data: Buffer | null): Promise<Completion> => {
    const refused = refusal(lu, ctx, cls);
    if (refused === null) return p.run(data);
    if (refused instanceof Promise) return refused.then((c) => c ?? p.run(data));
    return Promise.resolve(refused);
  };
  return {
    length: p.length,
    dir: p.dir,
    run: (data) => {
      // QoS (target/scsi/qos.ts): the same buckets as the SCSI front ends'; a Read or Write waits for its turn, never fails for it.
      const turn = qos !== null && lu.qos.active ? lu.qos.admit(initiatorNameOf(ctx.nexus), qos, p.length) : null;
      return turn !== null ? turn.then(() => admitted(data)) : admitted(data);
    },
  };
}

/**
 * Checks one I/O command against its namespace (range, access, size) before
 * any data moves; returns a status to complete it with at once, or how to run it.
 */
export function prepareIo(sqe: Buffer, ns: Namespace, ctx: IoContext): PreparedIo | { status: NvmeStatus } {
  const op = sqe[0];
  // A Read is guarded by its own run (ReadIo), one object per command where guarded() makes four.
  if (op === IoOpcode.Read) return prepare(sqe, ns, ctx);
  const resv = op === ResvOpcode.Register || op === ResvOpcode.Report || op === ResvOpcode.Acquire || op === ResvOpcode.Release;
  const p = resv ? prepareReservation(sqe, ns.lu, ctx)! : prepare(sqe, ns, ctx);
  if ('status' in p) return p;
  // Reservation commands themselves are never in conflict (Base 2.0 §8.19, Figure "Command Behavior in the Presence of a Reservation").
  const cls: PrClass = op === IoOpcode.Flush || resv ? 'exempt' : op === IoOpcode.Read || op === IoOpcode.Compare || op === IoOpcode.Verify ? 'read' : 'write';
  return guarded(p, ns.lu, ctx, cls, op === IoOpcode.Read ? 'read' : op === IoOpcode.Write ? 'write' : null);
}

/**
 * A Read, the command most of a host's I/O is: what refusal(), QoS, timed(),
 * the range lock and readForSend do for it, in one object and one async
 * function per command, where the general path (guarded() around a run that
 * nests timed, hold and readForSend) made about a dozen closures and promises
 * (docs/performance.md "NVMe/TCP: fewer objects per command").
 */
class ReadIo implements PreparedIo {
  readonly dir = 'c2h' as const;

  constructor(
    readonly lu: LogicalUnit,
    readonly ctx: IoContext,
    readonly lba: number,
    readonly blocks: number,
    readonly length: number,
  ) {}

  run(): Promise<Completion> {
    const { lu, ctx } = this;
    // QoS (target/scsi/qos.ts): the same buckets as the SCSI front ends'; a Read waits for its turn, never fails for it.
    const turn = lu.qos.active ? lu.qos.admit(initiatorNameOf(ctx.nexus), 'read', this.length) : null;
    if (turn !== null) return turn.then(() => this.#admitted());
    return this.#admitted();
  }

  #admitted(): Promise<Completion> {
    const refused = refusal(this.lu, this.ctx, 'read');
    if (refused === null) return this.#read();
    if (refused instanceof Promise) return refused.then((c) => c ?? this.#read());
    return Promise.resolve(refused);
  }

  /** timed() around the range lock around readForSend, as the other commands run, inlined. */
  async #read(): Promise<Completion> {
    const { lu, ctx, lba, length } = this;
    const t0 = performance.now();
    let c: Completion;
    try {
      const release = await lu.rangeLock.acquire(ctx.nexus, lba, lba + this.blocks, false);
      try {
        c = await readForSend(lu, length, lba * lu.blockSize);
      } finally {
        release();
      }
    } catch (e) {
      c = { status: statusForError('read', e) };
    }
    const error = c.status.sc !== 0 || c.status.sct !== 0;
    lu.stats.record(CLS.read, error ? 0 : length, error, performance.now() - t0);
    ctx.record(CLS.read, error ? 0 : length, error);
    return c;
  }
}

function prepare(sqe: Buffer, ns: Namespace, ctx: IoContext): PreparedIo | { status: NvmeStatus } {
  const { lu } = ns;
  const bs = lu.blockSize;
  const opcode = sqe[0];
  const cdw12 = cdw(sqe, 12);
  // PRINFO (CDW12 bits 29:26) needs protection information, which rblk does not keep (NVM 1.0 §3.2.4).
  const rw = opcode === IoOpcode.Read || opcode === IoOpcode.Write || opcode === IoOpcode.Compare || opcode === IoOpcode.Verify || opcode === IoOpcode.WriteZeroes;
  if (rw && ((cdw12 >>> 26) & 0xf) !== 0) return fail(Status.InvalidField);
  const writes = opcode === IoOpcode.Write || opcode === IoOpcode.WriteZeroes || opcode === IoOpcode.DatasetManagement;
  // The LU's software write protect (SCSI's Control page SWP, set by MODE SELECT) holds here too.
  if (writes && (ns.access !== 'rw' || lu.modes.swp)) return fail(Status.NamespaceWriteProtected);
  const fua = (cdw12 & (1 << 30)) !== 0;
  switch (opcode) {
    case IoOpcode.Read:
    case IoOpcode.Write:
    case IoOpcode.Compare: {
      const r = lbaRange(sqe, lu);
      if ('status' in r) return r;
      const len = r.blocks * bs;
      if (len > ctx.maxIo) return fail(Status.InvalidField);
      const { lba, blocks } = r;
      if (opcode === IoOpcode.Read) return new ReadIo(lu, ctx, lba, blocks, len);
      if (opcode === IoOpcode.Write) {
        return {
          length: len,
          dir: 'h2c',
          run: (data) =>
            timed(lu, ctx, CLS.write, len, 'write', () =>
              lu.rangeLock.hold(ctx.nexus, lba, lba + blocks, false, async () => {
                // FUA (CDW12 bit 30): durable before completion; so is every write with the write cache off.
                await writeBlocks(lu, data!, lba * bs, fua || !lu.modes.wce);
                return OK;
              }),
            ),
        };
      }
      // Compare (NVM 1.0 §3.2.1): read and compare under an exclusive range, Compare Failure on a difference.
      return {
        length: len,
        dir: 'h2c',
        run: (data) =>
          timed(lu, ctx, CLS.other, 0, 'compare', () =>
            lu.rangeLock.hold(ctx.nexus, lba, lba + blocks, true, async () => {
              const buf = await readBlocks(lu, len, lba * bs);
              return buf.equals(data!) ? OK : { status: Status.CompareFailure };
            }),
          ),
      };
    }
    case IoOpcode.Verify: {
      // Verify (NVM 1.0 §3.2.8): the blocks are read and no data moves; PRCHK needs PI, which we do not keep.
      const r = lbaRange(sqe, lu);
      if ('status' in r) return r;
      const { lba, blocks } = r;
      return {
        length: 0,
        dir: 'none',
        run: () =>
          timed(lu, ctx, CLS.other, 0, 'read', () =>
            lu.rangeLock.hold(ctx.nexus, lba, lba + blocks, false, async () => {
              const chunk = Math.max(bs, Math.floor(ctx.maxIo / bs) * bs);
              // Scratch memory is page-aligned, so this holds for O_DIRECT stores too.
              return withScratch(Math.min(chunk, blocks * bs), async (buf) => {
                for (let off = 0; off < blocks * bs; off += buf.length) {
                  const n = Math.min(buf.length, blocks * bs - off);
                  await lu.backend.read(buf.subarray(0, n), lba * bs + off);
                }
                return OK;
              });
            }),
          ),
      };
    }
    case IoOpcode.WriteZeroes: {
      // Write Zeroes (NVM 1.0 §3.2.9): DEAC (CDW12 bit 25) lets the blocks be deallocated; FUA bit 30.
      const r = lbaRange(sqe, lu);
      if ('status' in r) return r;
      const { lba, blocks } = r;
      const deac = (cdw12 & (1 << 25)) !== 0;
      return {
        length: 0,
        dir: 'none',
        run: () =>
          timed(lu, ctx, CLS.write, 0, 'write', () =>
            lu.rangeLock.hold(ctx.nexus, lba, lba + blocks, false, async () => {
              await lu.backend.writeZeroes(lba * bs, blocks * bs, deac && lu.thin);
              if (fua || !lu.modes.wce) await lu.backend.flush();
              return OK;
            }),
          ),
      };
    }
    case IoOpcode.DatasetManagement: {
      // Dataset Management (NVM 1.0 §3.2.3): NR CDW10 bits 7:0 (0's based); AD CDW11 bit 2. Ranges of 16 bytes:
      // context attributes 0-3, length in blocks 4-7, starting LBA 8-15.
      const nr = (cdw(sqe, 10) & 0xff) + 1;
      const ad = (cdw(sqe, 11) & (1 << 2)) !== 0;
      return {
        length: nr * 16,
        dir: 'h2c',
        run: (data) =>
          timed(lu, ctx, CLS.discard, 0, 'discard', async () => {
            const ranges: { lba: number; blocks: number }[] = [];
            for (let i = 0; i < nr; i++) {
              const blocks = data!.readUInt32LE(i * 16 + 4);
              const slba = data!.readBigUInt64LE(i * 16 + 8);
              if (slba + BigInt(blocks) > BigInt(lu.blocks)) return { status: Status.LbaOutOfRange };
              if (blocks > 0) ranges.push({ lba: Number(slba), blocks });
            }
            // Deallocation is advisory (NVM 1.0 §3.2.3.2.1): a store that cannot discard keeps the data.
            if (!ad || !lu.thin || !lu.backend.canDiscard) return OK;
            for (const r of ranges) {
              await lu.rangeLock.hold(ctx.nexus, r.lba, r.lba + r.blocks, false, () => lu.backend.discard(r.lba * bs, r.blocks * bs));
            }
            return OK;
          }),
      };
    }
    case IoOpcode.Flush:
      return { length: 0, dir: 'none', run: () => flushAll([ns], ctx) };
    default:
      return fail(Status.InvalidOpcode);
  }
}

/**
 * A fused Compare and Write (Base 2.0 §3.4.2, NVM 1.0 §3.2.1 and §3.2.9: FUSE
 * 01b then 10b, same namespace and blocks): as one atomic operation, with the
 * atomicity SCSI COMPARE AND WRITE has (target/scsi/commands/compare-and-write.ts):
 * the backend's own compareAndWrite when it has one (every gateway of a shared
 * store), else read, compare and write under an exclusive range lock. A
 * difference fails the Compare with Compare Failure and writes nothing; the
 * Write then completes with Command Aborted due to Failed Fused Command.
 */
export async function fusedCompareWrite(ns: Namespace, writeSqe: Buffer, compare: Buffer, data: Buffer, ctx: IoContext): Promise<[Completion, Completion]> {
  const { lu } = ns;
  const aborted: Completion = { status: Status.AbortFailedFused };
  const no = await refusal(lu, ctx, 'write');
  if (no) return [no, aborted];
  const r = lbaRange(writeSqe, lu);
  if ('status' in r) return [r, aborted];
  const fua = (cdw(writeSqe, 12) & (1 << 30)) !== 0 || !lu.modes.wce;
  const off = r.lba * lu.blockSize;
  let miscompare = false;
  const c = await timed(lu, ctx, CLS.write, data.length, 'compare', async () => {
    try {
      if (lu.backend.compareAndWrite) {
        await lu.rangeLock.hold(ctx.nexus, r.lba, r.lba + r.blocks, true, () => lu.backend.compareAndWrite!(compare, data, off, { fua }));
        return OK;
      }
      return await lu.rangeLock.hold(ctx.nexus, r.lba, r.lba + r.blocks, true, async () => {
        const now = await readBlocks(lu, compare.length, off);
        if (!now.equals(compare)) {
          miscompare = true;
          return { status: Status.CompareFailure };
        }
        await writeBlocks(lu, data, off, fua);
        return OK;
      });
    } catch (e) {
      if (!isMiscompare(e)) throw e;
      miscompare = true;
      return { status: Status.CompareFailure };
    }
  });
  if (miscompare || c.status !== Status.Success) return [c, aborted];
  return [OK, OK];
}

/** Flush (NVM 1.0 §3.2.2 / Base 2.0 §7.1): one namespace, or every attached one for NSID FFFFFFFFh. */
export async function flushAll(nss: readonly Namespace[], ctx: IoContext): Promise<Completion> {
  for (const ns of nss) {
    const no = await refusal(ns.lu, ctx, 'exempt');
    if (no) return no;
    const c = await timed(ns.lu, ctx, CLS.flush, 0, 'flush', async () => {
      await ns.lu.backend.flush();
      return OK;
    });
    if (c.status.sc !== 0 || c.status.sct !== 0) return c;
  }
  return OK;
}
