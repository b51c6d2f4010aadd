// The CLI's pure parts in-process: sizes, durations, ranges, the verify
// block format, the bench engine's stop rules and offsets, the progress bar.
import test from 'ava';
import { runBench, type BenchPlan, type BenchTarget } from '../../initiator/cli/bench-engine.js';
import { chunks, resolveRange } from '../../initiator/cli/byte-range.js';
import { UsageError } from '../../initiator/cli/cli-error.js';
import { ProgressBar } from '../../initiator/cli/progress-bar.js';
import { formatBytes, parseDuration, parseSize } from '../../initiator/cli/size.js';
import { hostToUrl } from '../../initiator/cli/target-args.js';
import { checkBlock, fillBlock, fillBlocks } from '../../initiator/cli/verify-pattern.js';

test('sizes: binary suffixes, decimal ones, and clear errors', (t) => {
  t.is(parseSize('4096', '--x'), 4096);
  t.is(parseSize('4k', '--x'), 4096);
  t.is(parseSize('1MiB', '--x'), 1 << 20);
  t.is(parseSize('1g', '--x'), 1 << 30);
  t.is(parseSize('1.5m', '--x'), 1.5 * (1 << 20));
  t.is(parseSize('2GB', '--x'), 2e9);
  t.throws(() => parseSize('4 kittens', '--bs'), { instanceOf: UsageError, message: "--bs: invalid size '4 kittens' (a byte count, or a number with a unit: 4k, 1MiB, 2g)" });
  t.throws(() => parseSize('0.3k', '--bs'), { message: "--bs: '0.3k' is not a whole number of bytes" });
  t.is(formatBytes(16 << 20), '16 MiB');
  t.is(formatBytes(1536), '1.5 KiB');
  t.is(formatBytes(1000), '1000 bytes');
});

test('durations: a bare number is seconds', (t) => {
  t.is(parseDuration('10', '--runtime'), 10_000);
  t.is(parseDuration('1s', '--runtime'), 1000);
  t.is(parseDuration('250ms', '--runtime'), 250);
  t.is(parseDuration('2m', '--runtime'), 120_000);
  t.throws(() => parseDuration('1 fortnight', '--runtime'), { instanceOf: UsageError });
});

test('discover targets become URLs, IPv6 included', (t) => {
  t.is(hostToUrl('10.0.0.5'), 'rblk://10.0.0.5');
  t.is(hostToUrl('10.0.0.5:7000'), 'rblk://10.0.0.5:7000');
  t.is(hostToUrl('fe80::1'), 'rblk://[fe80::1]');
  t.is(hostToUrl('[fe80::1]:7000'), 'rblk://[fe80::1]:7000');
  t.is(hostToUrl('rblk://h:1?provider=tcp'), 'rblk://h:1?provider=tcp');
  t.throws(() => hostToUrl('h/vol'), { instanceOf: UsageError, message: '"h/vol" is not HOST[:PORT]' });
});

test('ranges: defaults, alignment, the end, and chunking', (t) => {
  const vol = { name: 'v', size: 8192, blockSize: 512 };
  t.deepEqual(resolveRange(vol, {}), { offset: 0, length: 8192 });
  t.deepEqual(resolveRange(vol, { offset: 1024 }), { offset: 1024, length: 7168 });
  t.deepEqual(resolveRange(vol, { offset: 8192 }), { offset: 8192, length: 0 });
  t.throws(() => resolveRange(vol, { offset: 8704 }), { message: '--offset 8704 is past the end of volume v (8192 bytes, 8 KiB)' });
  t.throws(() => resolveRange(vol, { length: 100 }), { message: "--length 100 is not a multiple of volume v's 512-byte block size" });
  t.deepEqual(chunks({ offset: 512, length: 2560 }, 1024), [
    { offset: 512, length: 1024 },
    { offset: 1536, length: 1024 },
    { offset: 2560, length: 512 },
  ]);
});

test('verify blocks: reproducible, distinct per LBA and seed, and every kind of damage is described', (t) => {
  const a = Buffer.alloc(512);
  const b = Buffer.alloc(512);
  fillBlock(a, 77, 5);
  fillBlock(b, 77, 5);
  t.true(a.equals(b));
  t.is(a.subarray(0, 8).toString('latin1'), 'RBLKVFY1');
  t.is(a.readBigUInt64BE(8), 77n);
  fillBlock(b, 78, 5);
  t.false(a.subarray(24).equals(b.subarray(24)), 'another LBA, another filler');
  const scratch = Buffer.alloc(512);
  t.is(checkBlock(a, 77, 5, scratch), undefined);

  const torn = Buffer.from(a);
  torn[300] ^= 0xff;
  t.deepEqual(checkBlock(torn, 77, 5, scratch)?.found.replace(/0x[0-9a-f]{8}/g, 'X'), 'lba 77 seed 5 block size 512 crc X bad (computed X); 1 of 512 bytes differ, the first at byte 300');
  // A whole block that landed at the wrong LBA: its own CRC is fine, the LBA gives it away.
  const misplaced = Buffer.alloc(512);
  fillBlock(misplaced, 78, 5);
  t.regex(checkBlock(misplaced, 77, 5, scratch)?.found ?? '', /^lba 78 seed 5 block size 512 crc 0x[0-9a-f]{8} ok; /);
  t.regex(checkBlock(Buffer.alloc(512), 77, 5, scratch)?.found ?? '', /^all zeroes; /);
  t.regex(checkBlock(Buffer.alloc(512, 0x41), 77, 5, scratch)?.found ?? '', /^no verify header \(first bytes 4141414141414141\); /);

  const many = Buffer.alloc(4096 * 3);
  fillBlocks(many, 4096, 10, 9);
  const one = Buffer.alloc(4096);
  fillBlock(one, 12, 9);
  t.true(many.subarray(8192).equals(one));
});

/** A device that records where operations went, answering after a tick. */
function fakeDevice(): BenchTarget & { reads: number[]; writes: number[] } {
  const reads: number[] = [];
  const writes: number[] = [];
  return {
    reads,
    writes,
    read: async (offset) => {
      reads.push(offset);
      await new Promise((r) => setImmediate(r));
    },
    write: async (offset) => {
      writes.push(offset);
      await new Promise((r) => setImmediate(r));
    },
  };
}

const plan = (p: Partial<BenchPlan>): BenchPlan => ({
  pattern: 'seq',
  rw: 'read',
  readPercent: 70,
  blockSize: 4096,
  queueDepth: 4,
  range: { offset: 8192, length: 16 * 4096 },
  runtimeMs: null,
  totalBytes: 40 * 4096,
  seed: 1,
  ...p,
});

test('bench: a byte budget issues exactly that much; sequential offsets wrap inside the range', async (t) => {
  const dev = fakeDevice();
  const bufs = Array.from({ length: 4 }, () => Buffer.alloc(4096));
  const r = await runBench(dev, plan({}), bufs);
  t.is(r.ops, 40);
  t.is(r.bytes, 40 * 4096);
  t.deepEqual(dev.reads.slice(0, 17), [...Array.from({ length: 16 }, (_, i) => 8192 + i * 4096), 8192]);
  t.is(r.latencyUs.min > 0, true);
  t.is(r.read?.ops, 40);
  t.false('write' in r, 'a read-only run has no write section');
});

test('bench: fio-style percentiles and stdev, in order', async (t) => {
  const r = await runBench(fakeDevice(), plan({ totalBytes: 400 * 4096 }), [Buffer.alloc(4096)]);
  const l = r.latencyUs;
  const order = [l.min, l.p1, l.p5, l.p10, l.p50, l.p90, l.p95, l.p99, l.p99_9, l.p99_99, l.max];
  t.deepEqual([...order].sort((a, b) => a - b), order, JSON.stringify(l));
  t.true(l.stdev >= 0 && Number.isFinite(l.stdev));
  const w = await runBench(fakeDevice(), plan({ rw: 'write', totalBytes: 8 * 4096 }), [Buffer.alloc(4096)]);
  t.false('read' in w, 'a write-only run has no read section');
  t.is(w.write?.ops, 8);
});

test('bench: random offsets stay aligned and in range; the mix follows --mix', async (t) => {
  const dev = fakeDevice();
  const bufs = Array.from({ length: 8 }, () => Buffer.alloc(4096));
  const r = await runBench(dev, plan({ pattern: 'rand', rw: 'mixed', readPercent: 70, totalBytes: 2000 * 4096 }), bufs);
  const reads = r.read?.ops ?? 0;
  t.is(reads + (r.write?.ops ?? 0), 2000);
  t.true(reads > 1200 && reads < 1600, `${reads} reads of 2000 at 70%`);
  for (const o of [...dev.reads, ...dev.writes]) t.true(o >= 8192 && o < 8192 + 16 * 4096 && o % 4096 === 0);
  t.true(new Set(dev.reads).size > 8, 'offsets vary');
});

test('bench: the first I/O error ends the run and is what it rejects with', async (t) => {
  let n = 0;
  const failing: BenchTarget = {
    read: async () => {
      if (++n === 5) throw new Error('medium error at 5');
    },
    write: async () => undefined,
  };
  await t.throwsAsync(runBench(failing, plan({ totalBytes: 1000 * 4096 }), [Buffer.alloc(4096), Buffer.alloc(4096)]), { message: 'medium error at 5' });
});

test('bench: an abort signal stops it and marks the result interrupted', async (t) => {
  const dev = fakeDevice();
  const stop = new AbortController();
  setTimeout(() => stop.abort(), 20);
  const r = await runBench(dev, plan({ runtimeMs: 60_000, totalBytes: null }), [Buffer.alloc(4096)], { signal: stop.signal });
  t.true(r.interrupted);
  t.true(r.ops > 0);
});

test('the progress bar redraws in place and erases itself', (t) => {
  let out = '';
  const sink = { write: (s: string) => ((out += s), true) } as unknown as NodeJS.WritableStream;
  const bar = new ProgressBar(sink, 10);
  bar.update(0.5, 'half');
  t.is(out, '\r[#####-----]  50%  half');
  bar.update(1, 'x');
  t.is(out.slice(out.lastIndexOf('\r')), `\r${'[##########] 100%  x'.padEnd(23)}`, 'padded over the longer line before');
  bar.clear();
  t.true(out.endsWith(`\r${' '.repeat(20)}\r`));
  let log = '';
  const file = new ProgressBar({ write: (s: string) => ((log += s), true) } as unknown as NodeJS.WritableStream, 10, false);
  file.update(0.25, 'a');
  file.update(0.5, 'b');
  file.clear();
  t.is(log, ' 25%  a\n 50%  b\n', 'into a file: one line per update, no \\r');
});
