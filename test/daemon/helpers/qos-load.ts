// QD32 loads that count GOOD completions, for the QoS tests (docs/operations.md
// "QoS limits"): through the rblk library, a raw iSCSI session and a raw
// NVMe/TCP I/O queue. A read load given the volume's bytes (`expect`) compares
// every read with them; a failed command, a closed connection or a read that
// differs stops the load with an error (its `failure`), which rate() throws.
import type { ExecutionContext } from 'ava';
import type { Volume } from '../../../initiator/index.js';
import type { RawInitiator } from '../../iscsi/raw-initiator.js';
import { rwSqe, type RawHost } from '../../../bench/soak/nvme-raw-host.js';

export const QD = 32;
/** 4 KiB reads: 8 blocks of 512 bytes over iSCSI and NVMe/TCP. */
const BLOCKS = 8;
const READ = BLOCKS * 512;
/** Long enough to spend the default 100 ms burst (100 commands, in a few ms) and settle. */
export const WARMUP_MS = 400;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A load that keeps QD commands outstanding and counts GOOD completions; a failed one stops it with an error. */
export interface Load {
  completed: number;
  /** Reads compared with the volume's bytes (those given `expect`). */
  verified: number;
  failure: Error | null;
  stop(): Promise<void>;
}

/** Completions per second over windowMs, after warmUpMs (WARMUP_MS; longer for a larger burst). */
export async function rate(load: Load, windowMs: number, warmUpMs = WARMUP_MS): Promise<number> {
  await sleep(warmUpMs);
  const c0 = load.completed;
  const t0 = performance.now();
  await sleep(windowMs);
  const c1 = load.completed;
  const t1 = performance.now();
  if (load.failure) throw load.failure;
  return ((c1 - c0) * 1000) / (t1 - t0);
}

export async function measure(start: () => Load, windowMs: number): Promise<number> {
  const load = start();
  try {
    return await rate(load, windowMs);
  } finally {
    await load.stop();
  }
}

export function within(t: ExecutionContext, measured: number, limit: number, what: string, unit = 'IOPS'): void {
  t.log(`${what}: ${measured.toFixed(0)} ${unit} (limit ${limit})`);
  t.true(Math.abs(measured - limit) <= limit * 0.1, `${what}: ${measured.toFixed(0)} ${unit} is not within 10% of ${limit}`);
}

function newLoad(stop: () => Promise<void>): Load {
  return { completed: 0, verified: 0, failure: null, stop };
}

/** Compares a read of `got` at byte `offset` with the volume's bytes; false (and the load's failure set) when they differ. */
function check(load: Load, expect: Buffer | undefined, offset: number, got: Buffer, what: string): boolean {
  if (expect === undefined) return true;
  if (!got.equals(expect.subarray(offset, offset + got.length))) {
    load.failure ??= new Error(`${what}: the ${got.length} bytes read at offset ${offset} differ from the volume's`);
    return false;
  }
  load.verified++;
  return true;
}

/** QD writers of `size` bytes on an rblk library Volume. */
export function writeLoad(vol: Volume, size: number): Load {
  let stopped = false;
  const data = Buffer.alloc(size, 0x5a);
  const load = newLoad(async () => void ((stopped = true), await Promise.all(workers)));
  const workers = Array.from({ length: QD }, async (_, i) => {
    let n = i;
    while (!stopped) {
      try {
        await vol.write(((n++ * 7) % 256) * size, data);
        load.completed++;
      } catch (e) {
        load.failure ??= e as Error;
        return;
      }
    }
  });
  return load;
}

/** `qd` 4 KiB readers over the first `blocksOf` 4 KiB blocks of an rblk library Volume. */
export function volumeLoad(vol: Volume, blocksOf: number, qd = QD, expect?: Buffer): Load {
  let stopped = false;
  const load = newLoad(async () => void ((stopped = true), await Promise.all(workers)));
  const workers = Array.from({ length: qd }, async (_, i) => {
    let n = i;
    while (!stopped) {
      const offset = ((n++ * 7919) % blocksOf) * 4096;
      try {
        const got = await vol.read(offset, 4096);
        if (!check(load, expect, offset, got, 'rblk READ')) return;
        load.completed++;
      } catch (e) {
        load.failure ??= e as Error;
        return;
      }
    }
  });
  return load;
}

/**
 * QD READ(10)s of 4 KiB pipelined on a raw iSCSI session (LUN `lun`, 512-byte
 * blocks); a GOOD status (in the last Data-In or a SCSI Response) completes
 * one, its Data-In compared with `expect` when given.
 */
export function iscsiLoad(c: RawInitiator, o: { lun?: number; expect?: Buffer } = {}): Load {
  let stopped = false;
  let itt = 100;
  /** ITT → the read's byte offset and the data it has had so far. */
  const pending = new Map<number, { offset: number; data: Buffer }>();
  const send = (): void => {
    const lba = (itt * BLOCKS) % 4096;
    const cdb = Buffer.alloc(16);
    cdb[0] = 0x28;
    cdb.writeUInt32BE(lba, 2);
    cdb.writeUInt16BE(BLOCKS, 7);
    pending.set(itt, { offset: lba * 512, data: Buffer.alloc(READ) });
    c.command({ itt: itt++, cdb, read: true, edtl: READ, lun: o.lun ?? 0 });
  };
  const load = newLoad(async () => void ((stopped = true), await loop));
  for (let i = 0; i < QD; i++) send();
  const loop = (async () => {
    while (pending.size > 0) {
      const p = await c.next(undefined, 10_000);
      if (p === null) {
        load.failure ??= new Error('the iSCSI session closed or stalled');
        return;
      }
      if (p.op !== 0x21 && p.op !== 0x25) continue;
      const cmd = pending.get(p.bhs.readUInt32BE(16));
      if (cmd === undefined) {
        load.failure ??= new Error(`an answer (opcode 0x${p.op.toString(16)}) for no outstanding ITT`);
        return;
      }
      // Data-In (RFC 7143 §11.7): Buffer Offset in bytes 40..43.
      if (p.op === 0x25) p.data.copy(cmd.data, p.bhs.readUInt32BE(40));
      const status = p.op === 0x21 ? p.bhs[3] : (p.bhs[1] & 0x01) !== 0 ? p.bhs[3] : undefined;
      if (status === undefined) continue;
      pending.delete(p.bhs.readUInt32BE(16));
      if (status !== 0) {
        load.failure ??= new Error(`READ(10) ended with status ${status}`);
        return;
      }
      if (!check(load, o.expect, cmd.offset, cmd.data, 'iSCSI READ(10)')) return;
      load.completed++;
      if (!stopped) send();
    }
  })();
  return load;
}

/**
 * QD Reads of 4 KiB pipelined on a raw NVMe/TCP I/O queue (namespace `nsid`,
 * 512-byte blocks); a CapsuleResp or a C2HData with SUCCESS completes one,
 * its C2HData compared with `expect` when given.
 */
export function nvmeLoad(io: RawHost, o: { nsid?: number; expect?: Buffer } = {}): Load {
  let stopped = false;
  let n = 0;
  const pending = new Map<number, { offset: number; data: Buffer }>();
  const send = (cid: number): void => {
    const lba = (n++ * BLOCKS) % 4096;
    pending.set(cid, { offset: lba * 512, data: Buffer.alloc(READ) });
    io.sendCapsule(rwSqe(0x02, cid, o.nsid ?? 1, lba, BLOCKS, READ));
  };
  const load = newLoad(async () => void ((stopped = true), await loop));
  for (let cid = 1; cid <= QD; cid++) send(cid);
  const loop = (async () => {
    while (pending.size > 0) {
      let p;
      try {
        p = await io.next(10_000);
      } catch (e) {
        load.failure ??= e as Error;
        return;
      }
      let cid: number;
      if (p.type === 0x07) {
        // C2HData (NVMe/TCP 1.0 §3.6.2.8): CCCID at 8, DATAO at 12.
        cid = p.raw.readUInt16LE(8);
        const cmd = pending.get(cid);
        if (cmd === undefined) {
          load.failure ??= new Error(`C2HData for no outstanding command ${cid}`);
          return;
        }
        p.data?.copy(cmd.data, p.raw.readUInt32LE(12));
        if ((p.flags & 0x08) === 0) continue;
      } else if (p.type === 0x05) {
        // CQE (§3.6.2.6 CapsuleResp): status in DW3 bits 31:17.
        cid = p.raw.readUInt16LE(8 + 12);
        const status = p.raw.readUInt16LE(8 + 14) >> 1;
        if (status !== 0) {
          load.failure ??= new Error(`Read ended with status 0x${status.toString(16)}`);
          return;
        }
      } else continue;
      const cmd = pending.get(cid);
      pending.delete(cid);
      if (cmd === undefined) {
        load.failure ??= new Error(`a completion for no outstanding command ${cid}`);
        return;
      }
      if (!check(load, o.expect, cmd.offset, cmd.data, 'NVMe Read')) return;
      load.completed++;
      if (!stopped) send(cid);
    }
  })();
  return load;
}
