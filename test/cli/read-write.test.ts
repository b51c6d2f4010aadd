// write then read, byte for byte, through files and through stdin/stdout;
// alignment, range and read-only errors.
import test from 'ava';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pattern, rblk, tempDir } from './helpers/cli.js';
import { startTargetProcess, stopAllTargets, type TargetProcess } from './helpers/target-process.js';

const MiB = 1 << 20;
let started: Promise<TargetProcess> | undefined;
const target = (): Promise<TargetProcess> =>
  (started ??= startTargetProcess(null, {
    provider: 'tcp',
    volumes: [
      { name: 'files', lun: 0, size: 16 * MiB },
      { name: 'pipes', lun: 1, size: 4 * MiB },
      { name: 'ro', lun: 2, size: 1 * MiB, readOnly: true },
      { name: 'big4k', lun: 3, size: 4 * MiB, blockSize: 4096 },
      { name: 'json', lun: 4, size: 8 * MiB },
    ],
  }));
test.after.always(stopAllTargets);

test('write --input then read --output: the same bytes, also across chunk boundaries', async (t) => {
  const tp = await target();
  const dir = await tempDir(t);
  // 5 MiB + 3 blocks from 1 MiB + 512: more than one 4 MiB chunk, not chunk-aligned.
  const data = pattern(5 * MiB + 1536, 1);
  const input = join(dir, 'in.bin');
  await writeFile(input, data);
  const w = await rblk(['write', tp.url('files'), '--offset', '1049088', '--input', input]);
  t.is(w.code, 0, w.stderr);
  t.is(w.out, `wrote ${data.length} bytes (${data.length / 512} blocks) to files at offset 1049088\n`);
  const output = join(dir, 'out.bin');
  const r = await rblk(['read', tp.url('files'), '--offset', '1049088', '--length', String(data.length), '-o', output]);
  t.is(r.code, 0, r.stderr);
  t.is(r.out, '');
  t.true((await readFile(output)).equals(data));
  // The bytes around the range were not touched.
  const before = await rblk(['read', tp.url('files'), '--offset', '1MiB', '--length', '512']);
  t.true(before.stdout.equals(Buffer.alloc(512)));
});

test('write from stdin, read to stdout; a whole volume by default', async (t) => {
  const tp = await target();
  const data = pattern(4 * MiB, 2);
  const w = await rblk(['write', tp.url('pipes')], { input: data });
  t.is(w.code, 0, w.stderr);
  t.is(w.out, `wrote ${4 * MiB} bytes (8192 blocks) to pipes at offset 0\n`);
  const r = await rblk(['read', tp.url('pipes')]);
  t.is(r.code, 0, r.stderr);
  t.is(r.stdout.length, 4 * MiB);
  t.true(r.stdout.equals(data));
  const part = await rblk(['read', tp.url('pipes'), '--offset', '3m', '--length', '4k']);
  t.true(part.stdout.equals(data.subarray(3 * MiB, 3 * MiB + 4096)));
});

test('4 KiB blocks: sizes with suffixes, and --pad for a partial last block', async (t) => {
  const tp = await target();
  const data = pattern(10_000, 3);
  const w = await rblk(['write', tp.url('big4k'), '--offset', '8KiB', '--pad'], { input: data });
  t.is(w.code, 0, w.stderr);
  t.is(w.out, 'wrote 12288 bytes (3 blocks) to big4k at offset 8192 (2288 bytes of zero padding)\n');
  const r = await rblk(['read', tp.url('big4k'), '--offset', '8k', '--length', '12k']);
  t.true(r.stdout.equals(Buffer.concat([data, Buffer.alloc(2288)])));
});

test('an unaligned offset or length is a usage error (exit 2) before any I/O', async (t) => {
  const tp = await target();
  const off = await rblk(['read', tp.url('files'), '--offset', '100']);
  t.is(off.code, 2);
  t.is(off.stderr, "rblk: --offset 100 is not a multiple of volume files's 512-byte block size\n");
  t.is(off.out, '');
  const len = await rblk(['read', tp.url('big4k'), '--length', '512']);
  t.is(len.code, 2);
  t.is(len.stderr, "rblk: --length 512 is not a multiple of volume big4k's 4096-byte block size\n");
  t.is(len.out, '');
});

test('ranges past the end are refused', async (t) => {
  const tp = await target();
  const r = await rblk(['read', tp.url('pipes'), '--offset', '4m', '--length', '512']);
  t.is(r.code, 2);
  t.is(r.stderr, 'rblk: [4194304, +512) runs past the end of volume pipes (4194304 bytes, 4 MiB)\n');
  const dir = await tempDir(t);
  const big = join(dir, 'big.bin');
  await writeFile(big, Buffer.alloc(MiB));
  const w = await rblk(['write', tp.url('pipes'), '--offset', '3584k', '-i', big]);
  t.is(w.code, 2);
  t.is(w.stderr, 'rblk: [3670016, +1048576) runs past the end of volume pipes (4194304 bytes, 4 MiB)\n');
});

test('input that is not whole blocks: a file is refused up front; stdin writes the whole blocks and fails', async (t) => {
  const tp = await target();
  const dir = await tempDir(t);
  const odd = join(dir, 'odd.bin');
  await writeFile(odd, Buffer.alloc(1000));
  const f = await rblk(['write', tp.url('files'), '-i', odd]);
  t.is(f.code, 2);
  t.is(f.stderr, `rblk: ${odd} is 1000 bytes, not a multiple of volume files's 512-byte block size (pass --pad to zero-fill the last block)\n`);
  const s = await rblk(['write', tp.url('files'), '--offset', '15m'], { input: pattern(1000, 4) });
  t.is(s.code, 1);
  t.is(s.stderr, 'rblk: the input ends with a partial block (488 bytes past the last whole 512-byte block); that block was not written: pass --pad to zero-fill it\n');
});

test('writing a read-only volume: exit 1 with the target\'s WRITE PROTECTED', async (t) => {
  const tp = await target();
  const r = await rblk(['write', tp.url('ro')], { input: Buffer.alloc(4096, 1) });
  t.is(r.code, 1);
  t.is(r.stderr, 'rblk: write [0, +4096) on volume ro: DATA PROTECT 27/00 WRITE PROTECTED [WRITE_PROTECTED]\n');
  t.is(r.out, '');
});

test('write and read with --json and --progress: one JSON object on stdout, progress lines on stderr, the same bytes', async (t) => {
  const tp = await target();
  const dir = await tempDir(t);
  const data = pattern(6 * MiB, 11);
  const input = join(dir, 'in.bin');
  await writeFile(input, data);
  const w = await rblk(['write', tp.url('json'), '--input', input, '--json', '--progress']);
  t.is(w.code, 0, w.stderr);
  t.like(JSON.parse(w.out), { volume: 'json', offset: 0, bytes: data.length, blocks: data.length / 512, padded: 0, fua: false, flushed: true });
  // Not a terminal: plain lines (possibly none, for a run shorter than one interval), never \r.
  t.false(w.stderr.includes('\r'));
  for (const line of w.stderr.split('\n').filter((l) => l !== '')) t.regex(line, /^ {0,2}\d+% {2}wrote [\d.]+ \S+ of 6 MiB {2}[\d.]+ [MG]iB\/s {2}\d+\.\d s$/);

  const output = join(dir, 'out.bin');
  const r = await rblk(['read', tp.url('json'), '--length', '6m', '-o', output, '--json']);
  t.is(r.code, 0, r.stderr);
  const j = JSON.parse(r.out) as { volume: string; offset: number; length: number; output: string; bandwidth: number };
  t.like(j, { volume: 'json', offset: 0, length: data.length, output });
  t.true(j.bandwidth > 0);
  t.true((await readFile(output)).equals(data));

  const noFile = await rblk(['read', tp.url('json'), '--json']);
  t.is(noFile.code, 2);
  t.is(noFile.stderr, 'rblk: --json needs --output FILE: without it stdout carries the data\n');
});
