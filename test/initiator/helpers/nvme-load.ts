// A verifying load for the NVMe/TCP host's tests: `workers` loops, each on a
// disjoint set of blocks (block mod workers), writing random blocks and
// reading back what it last wrote (zeroes before that), so that every
// acknowledged write is checked and no two commands in flight overlap.
// `registered` moves each worker's data through one registered buffer of its
// own (allocate(); docs/nvme.md "Registered buffers"), reused for every read
// and write, so the same memory serves across reconnects; `fua` sets FUA on
// every write. `offsetBlocks` shifts the load so two loads share a volume.
import { randomBytes, randomInt } from 'node:crypto';
import type { NvmeVolume, RegisteredBuffer } from '../../../initiator/index.js';
import { until } from '../../../bench/kit/wait.js';

export interface LoadResult {
  ops: number;
  reads: number;
  writes: number;
  errors: string[];
  mismatches: number;
  /** What each mismatching read found: 'zeroes', 'an older write', or 'other'. */
  found: string[];
}

export interface Load {
  /** Stops the loops after their current command and resolves their counts. */
  stop(): Promise<LoadResult>;
  /** Commands completed so far. */
  readonly ops: number;
  /** What each block was last acknowledged to hold (absent: zeroes). */
  readonly written: Map<number, Buffer>;
}

export interface LoadOptions {
  workers: number;
  blocks: number;
  blockBytes?: number;
  readShare?: number;
  registered?: boolean;
  fua?: boolean;
  offsetBlocks?: number;
}

export function startLoad(vol: NvmeVolume, o: LoadOptions): Load {
  const bs = o.blockBytes ?? 4096;
  const base = o.offsetBlocks ?? 0;
  const written = new Map<number, Buffer>();
  const history = new Map<number, Buffer[]>();
  const r: LoadResult = { ops: 0, reads: 0, writes: 0, errors: [], mismatches: 0, found: [] };
  let running = true;
  const worker = async (w: number): Promise<void> => {
    const mine = Math.floor((o.blocks - w - 1) / o.workers) + 1;
    const reg = o.registered ? vol.allocate(bs) : undefined;
    try {
      await loop(w, mine, reg);
    } finally {
      reg?.release();
    }
  };
  const loop = async (w: number, mine: number, reg: RegisteredBuffer | undefined): Promise<void> => {
    while (running) {
      const block = w + o.workers * randomInt(mine);
      const offset = (base + block) * bs;
      try {
        if (Math.random() < (o.readShare ?? 0.5)) {
          const got = reg ? await vol.read(offset, reg) : await vol.read(offset, bs);
          if (reg && got.buffer !== reg.buffer.buffer) throw new Error('a read into registered memory returned other memory');
          const want = written.get(block) ?? Buffer.alloc(bs);
          if (!got.equals(want)) {
            r.mismatches++;
            const old = history.get(block) ?? [];
            r.found.push(`block ${block}: ${got.equals(Buffer.alloc(bs)) ? 'zeroes' : old.some((b) => b.equals(got)) ? `write ${old.findIndex((b) => b.equals(got))} of ${old.length}` : 'other'}`);
          }
          r.reads++;
        } else {
          const data = randomBytes(bs);
          if (reg) data.copy(reg.buffer);
          await vol.write(offset, reg ?? data, { fua: o.fua ?? false });
          written.set(block, data);
          history.set(block, [...(history.get(block) ?? []), data]);
          r.writes++;
        }
        r.ops++;
      } catch (e) {
        r.errors.push(e instanceof Error ? e.message : String(e));
        if (r.errors.length > 20) running = false;
      }
    }
  };
  const all = Promise.all(Array.from({ length: o.workers }, (_, w) => worker(w)));
  return {
    get ops() {
      return r.ops;
    },
    written,
    async stop() {
      running = false;
      await all;
      return r;
    },
  };
}

/** Reads every block the load wrote and counts those that differ from what was acknowledged. */
export async function verifyAll(vol: NvmeVolume, written: Map<number, Buffer>, bs = 4096, offsetBlocks = 0): Promise<number> {
  let bad = 0;
  for (const [block, data] of written) if (!(await vol.read((offsetBlocks + block) * bs, bs)).equals(data)) bad++;
  return bad;
}

export { until };
