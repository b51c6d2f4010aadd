// Trains (docs/protocol.md §5.1, version 5): one message carrying several CMD
// capsules back to back, each framed by its own header's length field. The
// initiator's native queue sends the commands of one burst this way, so that
// they cost one send and one receive instead of one each. This file only
// frames: each capsule is then decoded by decodeCapsule as if it had come
// alone. native/src/core/fast-capsule.cc ScanTrain frames the same way, and
// test/native/fast-decode.test.ts holds the two together over the fuzz corpus.
import { HEADER_SIZE, HeaderField, Opcode, opcodeName } from './constants.js';
import { fail } from './errors.js';

/**
 * The capsules of one message received on a connection of version 5 or later.
 * A message that is one capsule by its first length field (or too short to
 * have one) comes back whole, for decodeCapsule to judge. Anything shorter is
 * a train: every capsule in it a CMD, none shorter than a header, the last
 * ending exactly at the message's end; otherwise this throws ProtocolError.
 */
export function splitTrain(buf: Buffer): Buffer[] {
  if (buf.length < HEADER_SIZE || buf.readUInt32BE(HeaderField.LENGTH) >= buf.length) return [buf];
  const out: Buffer[] = [];
  let off = 0;
  while (off < buf.length) {
    const left = buf.length - off;
    const which = `train: capsule ${out.length + 1} at byte ${off}`;
    if (left < HEADER_SIZE) fail('TRUNCATED', `${which} has ${left} bytes, less than a header`);
    const length = buf.readUInt32BE(off + HeaderField.LENGTH);
    if (length < HEADER_SIZE) fail('LENGTH_MISMATCH', `${which}: length field says ${length} bytes, less than a header`);
    if (length > left) fail('TRUNCATED', `${which}: length field says ${length} bytes, ${left} are left`);
    const op = buf[off + HeaderField.OPCODE];
    if (op !== Opcode.CMD) fail('BAD_OPCODE', `${which} is ${opcodeName(op)}; only CMD capsules travel in a train`);
    out.push(buf.subarray(off, off + length));
    off += length;
  }
  return out;
}
