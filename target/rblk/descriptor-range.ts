// Byte ranges of a data descriptor list (docs/protocol.md §9.1): the list
// names the initiator's buffer as consecutive regions, and a transfer of
// bytes [offset, offset + length) of that buffer touches only part of it.
import type { DataDescriptor } from '../../protocol/wire/index.js';

/** The regions holding bytes [offset, offset + length) of the buffer the list describes, in order. */
export function descriptorRange(list: readonly DataDescriptor[], offset: number, length: number): DataDescriptor[] {
  const out: DataDescriptor[] = [];
  let skip = offset;
  let left = length;
  for (const d of list) {
    if (left === 0) break;
    if (skip >= d.length) {
      skip -= d.length;
      continue;
    }
    const n = Math.min(left, d.length - skip);
    out.push({ address: d.address + BigInt(skip), key: d.key, length: n });
    skip = 0;
    left -= n;
  }
  return out;
}
