// PduStream (protocol/nvme/pdu.ts): bytes pushed in arbitrary chunks come out
// in order, whole headers joined only where they are split, data copied
// straight into a destination with its CRC32C equal to the one over the
// whole, and nothing consumed past what was asked.
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { crc32c } from '../../protocol/crc32c.js';
import { PduStream } from '../../protocol/nvme/pdu.js';

function chunked(b: Buffer, cuts: number[]): Buffer[] {
  const out: Buffer[] = [];
  let at = 0;
  for (const c of [...cuts, b.length]) {
    out.push(b.subarray(at, c));
    at = c;
  }
  return out;
}

test('peek, take, copyOut and skip across chunk boundaries', (t) => {
  const all = randomBytes(10_000);
  for (const cuts of [[], [1], [3, 4, 5, 6, 7], [8, 24, 4000, 4001, 9999], Array.from({ length: 99 }, (_, i) => (i + 1) * 100)]) {
    const s = new PduStream();
    for (const c of chunked(all, cuts)) s.push(c);
    t.is(s.length, all.length);
    t.true(s.peek(8).equals(all.subarray(0, 8)));
    t.is(s.length, all.length, 'peek consumes nothing');
    t.true(s.take(24).equals(all.subarray(0, 24)));
    const dest = Buffer.alloc(6000, 0xaa);
    const crc = s.copyOut(5000, dest, 500, 0);
    t.true(dest.subarray(500, 5500).equals(all.subarray(24, 5024)), `data copied straight out (cuts ${cuts.join(',')})`);
    t.true(dest.subarray(0, 500).equals(Buffer.alloc(500, 0xaa)) && dest.subarray(5500).equals(Buffer.alloc(500, 0xaa)));
    t.is(crc, crc32c(all.subarray(24, 5024)), 'the CRC32C continued over the chunks is the one over the whole');
    t.is(s.copyOut(10, null, 0), 0, 'no CRC asked, none given');
    s.skip(966);
    t.is(s.length, all.length - 6000);
    t.true(s.take(4000).equals(all.subarray(6000)));
    t.is(s.length, 0);
    t.throws(() => s.peek(1), { instanceOf: RangeError });
  }
});

test('clear drops what is held; empty chunks are ignored', (t) => {
  const s = new PduStream();
  s.push(Buffer.alloc(0));
  s.push(Buffer.from([1, 2, 3]));
  s.push(Buffer.alloc(0));
  s.push(Buffer.from([4]));
  t.deepEqual([...s.take(4)], [1, 2, 3, 4]);
  s.push(Buffer.from([5]));
  s.clear();
  t.is(s.length, 0);
  t.throws(() => s.copyOut(1, null, 0), { instanceOf: RangeError });
});
