// Writes under a snapshot, and what the snapshot must then hold
// (docs/operations.md "Snapshots and clones"): the snapshot tests' load and
// check, for file volumes (snapshot.test.ts) and rbd volumes
// (rbd-snapshot.test.ts).
import type { Session, Volume } from '../../../initiator/index.js';
import { controlRequest } from '../../../target/daemon/control-client.js';

export const BS = 4096;
export const QD = 32;

/**
 * The block every write puts down: its id and block in the first 16 bytes,
 * the rest a pseudo-random stream of them, so a torn or misplaced block is seen.
 * Id 0 is pattern A, -1 the overwrite after the snapshot.
 */
export function blockOf(id: number, block: number): Buffer {
  const b = Buffer.alloc(BS);
  b.writeDoubleLE(id, 0);
  b.writeUInt32LE(block, 8);
  b.write('rblk', 12, 'latin1');
  // xorshift32, seeded by both.
  let x = (Math.imul(id | 0, 0x9e3779b1) ^ Math.imul(block + 1, 0x85ebca6b)) >>> 0 || 1;
  for (let off = 16; off < BS; off += 4) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    b.writeUInt32LE(x >>> 0, off);
  }
  return b;
}

export async function fill(vol: Volume, id: number, blocks: number): Promise<void> {
  const per = 32; // 128 KiB writes
  for (let first = 0; first < blocks; first += per) {
    await vol.write(first * BS, Buffer.concat(Array.from({ length: per }, (_, i) => blockOf(id, first + i))));
  }
}

export async function readAll(vol: Volume, blocks: number): Promise<Buffer> {
  const out = Buffer.alloc(blocks * BS);
  const chunk = 128 * 1024;
  for (let off = 0; off < out.length; off += chunk) await vol.read(off, out.subarray(off, off + chunk));
  return out;
}

export interface Write {
  id: number;
  block: number;
  issued: bigint;
  acked: bigint;
}

export interface LoadResult {
  writes: Write[];
  snapStart: bigint;
  snapEnd: bigint;
  taken: { path: string; method: string; pausedMs: number };
}

/**
 * QD32 writes for a second, the snapshot, a second more. Each worker owns
 * every QD-th block and writes one block at a time, so the writes of one
 * block are ordered by issue and acknowledgement.
 */
export async function snapshotUnderLoad(session: Session, vol: Volume, socket: string, args: string[], blocks: number): Promise<LoadResult> {
  const writes: Write[] = [];
  let nextId = 1;
  let stop = false;
  const memory = session.allocate(QD * BS);
  const load = Promise.all(
    Array.from({ length: QD }, async (_, worker) => {
      const buf = memory.buffer.subarray(worker * BS, (worker + 1) * BS);
      while (!stop) {
        const block = worker + QD * Math.floor(Math.random() * (blocks / QD));
        const id = nextId++;
        blockOf(id, block).copy(buf);
        const issued = process.hrtime.bigint();
        await vol.write(block * BS, buf);
        writes.push({ id, block, issued, acked: process.hrtime.bigint() });
      }
    }),
  );
  try {
    await new Promise((r) => setTimeout(r, 1000));
    const snapStart = process.hrtime.bigint();
    const taken = (await controlRequest(socket, 'snapshot', args)) as LoadResult['taken'];
    const snapEnd = process.hrtime.bigint();
    await new Promise((r) => setTimeout(r, 1000));
    return { writes, snapStart, snapEnd, taken };
  } finally {
    stop = true;
    await load;
    memory.release();
  }
}

/**
 * What the snapshot must hold, block by block: the last write acknowledged
 * before the request, or a later one issued before the answer; never one
 * issued after it, never the overwrite; each whole. And it is one instant of
 * the volume (crash consistency): if it holds a write issued at time T, it
 * holds, on every block, the last write acknowledged before T or a later one.
 * Returns the problems (empty when it holds) and how many blocks had a write
 * in flight across the snapshot.
 */
export function checkSnapshot(snap: Buffer, r: LoadResult, blocks: number): { problems: string[]; inFlight: number } {
  const byId = new Map(r.writes.map((x) => [x.id, x]));
  const byBlock = new Map<number, Write[]>();
  for (const x of [...r.writes].sort((a, b) => a.id - b.id)) byBlock.set(x.block, [...(byBlock.get(x.block) ?? []), x]);
  const held = Array.from({ length: blocks }, (_, block) => snap.readDoubleLE(block * BS));
  // The latest issue among the writes the snapshot holds: everything acknowledged before it must be there.
  let cut = r.snapStart;
  for (const id of held) {
    const x = byId.get(id);
    if (x !== undefined && x.issued > cut) cut = x.issued;
  }
  let inFlight = 0;
  const problems: string[] = [];
  for (let block = 0; block < blocks; block++) {
    const id = held[block];
    const mine = byBlock.get(block) ?? [];
    const floorOf = (t: bigint): number => mine.filter((x) => x.acked < t).reduce((m, x) => Math.max(m, x.id), 0);
    const floor = floorOf(r.snapStart);
    const allowed = new Set([floor, ...mine.filter((x) => x.id > floor && x.issued <= r.snapEnd).map((x) => x.id)]);
    if (allowed.size > 1) inFlight++;
    if (!allowed.has(id)) problems.push(`block ${block}: write ${id} in the snapshot, expected one of ${[...allowed].join(', ')}`);
    else if (!snap.subarray(block * BS, (block + 1) * BS).equals(blockOf(id, block))) problems.push(`block ${block}: write ${id} is not whole`);
    else if (id < floorOf(cut)) problems.push(`block ${block}: write ${id} in the snapshot, but write ${floorOf(cut)} was acknowledged before another write it holds was issued: not one instant`);
  }
  return { problems, inFlight };
}

