// The frame the read-modify-write commands share (COMPARE AND WRITE, SBC-4 5.3;
// ORWRITE(16), 5.11; WRITE ATOMIC(16), 5.48): NLB 0 is a no-op, the range is
// checked again at execution (a resize may have come between parse and run),
// and the whole range is held exclusively across the command's reads and
// writes, so no other command sees it half done (range-lock.ts).
import { checkRange } from './cdb-fields.js';
import type { CommandIo } from './command-spec.js';
import { good, isFailure, type Outcome } from './outcome.js';

export interface RangeParams {
  lba: number;
  blocks: number;
}

/** Runs `run(bytes, offset)` over the command's range, held exclusively. */
export function atomicRange(io: CommandIo, p: RangeParams, run: (bytes: number, offset: number) => Promise<Outcome>): Promise<Outcome> {
  if (p.blocks === 0) return Promise.resolve(good());
  const lu = io.lu;
  const start = checkRange(lu, p.lba, p.blocks);
  if (isFailure(start)) return Promise.resolve(start);
  return lu.rangeLock.hold(io.nexus, start, start + p.blocks, true, () => run(p.blocks * lu.blockSize, start * lu.blockSize));
}
