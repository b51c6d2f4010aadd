// Trains (docs/protocol.md §5.1): how a version-5 receiver frames one message
// into capsules. A message that is one capsule by its first length field comes
// back whole (decodeCapsule judges it as before); anything shorter is a train
// of CMDs, each framed by its own length field, or a ProtocolError.
import test, { type ExecutionContext } from 'ava';
import { capsuleBuffer, decodeCapsule, Opcode, ProtocolError, splitTrain, type Capsule, type ProtocolErrorReason } from '../../protocol/wire/index.js';
import { sampleCapsules } from './samples.js';

const samples = sampleCapsules();
const cmds = samples.filter((c) => c.op === Opcode.CMD).map((c) => capsuleBuffer(c));
const keepAlive = capsuleBuffer(samples.find((c) => c.op === Opcode.KEEPALIVE)!);

function rejects(t: ExecutionContext, message: Buffer, reason: ProtocolErrorReason, text: RegExp): void {
  const e = t.throws(() => splitTrain(message), { instanceOf: ProtocolError });
  t.is(e?.reason, reason);
  t.regex(e?.message ?? '', text);
}

test('a message of one capsule comes back whole, whatever its opcode', (t) => {
  for (const c of samples) {
    const buf = capsuleBuffer(c);
    const pieces = splitTrain(buf);
    t.is(pieces.length, 1);
    t.is(pieces[0], buf);
  }
  // Too short for a header, or a length field claiming more than arrived: whole, for decodeCapsule's TRUNCATED.
  const short = Buffer.alloc(10);
  t.is(splitTrain(short)[0], short);
  const claims = Buffer.from(cmds[0]);
  claims.writeUInt32BE(claims.length + 1, 4);
  t.is(splitTrain(claims)[0], claims);
});

test('a train of CMDs splits into the capsules sent, each decoding as if it came alone', (t) => {
  t.true(cmds.length >= 2);
  const message = Buffer.concat([...cmds, cmds[0]]);
  const pieces = splitTrain(message);
  t.deepEqual(
    pieces.map((p) => p.length),
    [...cmds, cmds[0]].map((c) => c.length),
  );
  // Views of the message, not copies.
  t.is(pieces[1].buffer, message.buffer);
  const decoded = pieces.map((p) => decodeCapsule(p, { from: 'initiator' }) as Capsule);
  t.deepEqual(
    decoded.map((c) => c.tag),
    [...cmds, cmds[0]].map((c) => c.readBigUInt64BE(8)),
  );
});

test('a malformed train is a protocol error that names the capsule', (t) => {
  // Only CMDs travel in a train (§5.1).
  rejects(t, Buffer.concat([cmds[0], keepAlive]), 'BAD_OPCODE', /capsule 2 at byte \d+ is KEEPALIVE; only CMD/);
  rejects(t, Buffer.concat([keepAlive, cmds[0]]), 'BAD_OPCODE', /capsule 1 at byte 0 is KEEPALIVE/);
  // The last capsule runs past the message's end.
  const cut = Buffer.concat([cmds[0], cmds[1]]).subarray(0, cmds[0].length + cmds[1].length - 1);
  rejects(t, cut, 'TRUNCATED', /capsule 2 .* length field says \d+ bytes, \d+ are left/);
  // Bytes after the last capsule too few for a header.
  rejects(t, Buffer.concat([cmds[0], Buffer.alloc(5)]), 'TRUNCATED', /capsule 2 .* has 5 bytes, less than a header/);
  // A length field below a header's size would never advance.
  const zero = Buffer.concat([cmds[0], cmds[1]]);
  zero.writeUInt32BE(0, cmds[0].length + 4);
  rejects(t, zero, 'LENGTH_MISMATCH', /length field says 0 bytes, less than a header/);
  const first = Buffer.concat([cmds[0], cmds[1]]);
  first.writeUInt32BE(8, 4);
  rejects(t, first, 'LENGTH_MISMATCH', /capsule 1 at byte 0: length field says 8 bytes/);
});
