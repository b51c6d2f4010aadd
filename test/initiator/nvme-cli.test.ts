// `rblk info`, `read`, `write` and `bench` with an nvme+tcp:// URL, run as a
// child process against the real rblkd's nvme-tcp listener, as with an
// rblk:// URL (test/cli/read-write.test.ts, discover-info.test.ts,
// bench-verify.test.ts): bytes written by the CLI read back by the CLI and
// found in the volume file, what info prints checked against the library's
// view, bench's counts, and the errors (docs/nvme.md "The rblk library as an
// NVMe/TCP host", docs/cli.md).
import test from 'ava';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { connectNvme } from '../../initiator/index.js';
import { pattern, rblk, tempDir } from '../cli/helpers/cli.js';
import { checkSuiteResources } from '../helpers/resources.js';
import { NQN, startNvmeDaemon } from './helpers/nvme-daemon.js';
import { fileBytes } from '../daemon/helpers/daemon-process.js';

checkSuiteResources(test);

const MiB = 1 << 20;

test('write --input then read --output, and stdin to stdout: the same bytes, in the volume file too', async (t) => {
  const dmn = await startNvmeDaemon(t);
  const dir = await tempDir(t);
  // 5 MiB + 3 blocks from 1 MiB + 512: more than one 4 MiB chunk, not chunk-aligned, split at MDTS.
  const data = pattern(5 * MiB + 1536, 11);
  const input = join(dir, 'in.bin');
  await writeFile(input, data);
  const w = await rblk(['write', dmn.url(), '--offset', '1049088', '--input', input]);
  t.is(w.code, 0, w.stderr);
  t.is(w.out, `wrote ${data.length} bytes (${data.length / 512} blocks) to nsid1 at offset 1049088\n`);
  t.true(fileBytes(dmn.file, 1049088, data.length).equals(data), 'the bytes are in the volume file');
  const output = join(dir, 'out.bin');
  const r = await rblk(['read', dmn.url('?nsid=1'), '--offset', '1049088', '--length', String(data.length), '-o', output]);
  t.is(r.code, 0, r.stderr);
  t.true((await readFile(output)).equals(data));

  const piped = pattern(64 * 1024, 12);
  const w2 = await rblk(['write', dmn.url('?digest=header,data'), '--offset', '8m', '--fua', '--json'], { input: piped });
  t.is(w2.code, 0, w2.stderr);
  t.like(JSON.parse(w2.out), { volume: 'nsid1', offset: 8 * MiB, bytes: piped.length, blocks: 128, fua: true, flushed: true });
  const r2 = await rblk(['read', dmn.url(), '--offset', '8m', '--length', '64k']);
  t.is(r2.code, 0, r2.stderr);
  t.true(r2.stdout.equals(piped));
  const before = await rblk(['read', dmn.url(), '--offset', '1m', '--length', '512']);
  t.is(before.code, 0, before.stderr);
  t.true(before.stdout.equals(Buffer.alloc(512)), 'the block before the written range is untouched');

  const past = await rblk(['write', dmn.url(), '--offset', '16m'], { input: Buffer.alloc(512) });
  t.not(past.code, 0);
  t.regex(past.stderr, /16777216|end of/);
});

test('info and info --json: the namespace as Identify says it, and each path', async (t) => {
  const dmn = await startNvmeDaemon(t);
  const s = await connectNvme(dmn.url(), { queues: 1 });
  const vol = await s.open(1);
  const { nguid, uuid } = vol;
  await s.close();

  const r = await rblk(['info', dmn.url()]);
  t.is(r.code, 0, r.stderr);
  const rows = Object.fromEntries(r.out.trimEnd().split('\n').map((l) => l.split(/:\s+/, 2).map((x) => x.trim()) as [string, string]));
  t.like(rows, { namespace: '1', subsystem: NQN, size: '16 MiB (16777216 bytes)', blocks: '32768', 'block size': '512', 'read-only': 'no', thin: 'yes', nguid, uuid: uuid ?? 'none', provider: 'nvme-tcp' });
  t.regex(rows['path 0'], new RegExp(`^127\\.0\\.0\\.1:${dmn.port} live, controller \\d+, 4 I/O queue\\(s\\)`));

  const j = await rblk(['info', dmn.url(), '--json', '--connections', '2']);
  t.is(j.code, 0, j.stderr);
  const facts = JSON.parse(j.out) as { nsid: number; size: number; blockSize: number; nguid: string; subsystem: string; maxTransfer: number; paths: { ioQueues: number; state: string }[] };
  t.like(facts, { nsid: 1, size: 16 * MiB, blockSize: 512, nguid, subsystem: NQN, maxTransfer: 128 * 1024 });
  t.deepEqual(facts.paths.map((p) => [p.state, p.ioQueues]), [['live', 2]], '--connections is the I/O queues');

  const missing = await rblk(['info', dmn.url('?nsid=9')]);
  t.is(missing.code, 1);
  t.regex(missing.stderr, /namespace 9 .*not active/);
  const rblkFlag = await rblk(['info', dmn.url(), '--initiator-name', 'iqn.2026-11.io.rblk:x']);
  t.is(rblkFlag.code, 2, 'an rblk-only flag is a usage error');
  t.regex(rblkFlag.stderr, /--initiator-name: not for an nvme\+tcp:\/\/ URL/);
  const noSubsystem = await rblk(['read', `nvme+tcp://127.0.0.1:${dmn.port}`, '--length', '512']);
  t.is(noSubsystem.code, 2);
  t.regex(noSubsystem.stderr, /names no subsystem/);
  const badUrl = await rblk(['info', `nvme+tcp://127.0.0.1:${dmn.port}/${NQN}?nsid=0`]);
  t.is(badUrl.code, 2);
  t.regex(badUrl.stderr, /nsid 0/);
});

test('bench over nvme+tcp: writes of a byte budget land, reads count what they did, with and without registered memory', async (t) => {
  const dmn = await startNvmeDaemon(t);
  const w = await rblk(['bench', dmn.url(), '--json', '--pattern', 'seq', '--rw', 'write', '--bs', '64k', '--qd', '4', '--size', '4m', '--yes', '--seed', '3']);
  t.is(w.code, 0, w.stderr);
  const wj = JSON.parse(w.out) as { volume: string; ops: number; bytes: number; zeroCopy: boolean; reconnects: number; interrupted: boolean };
  t.like(wj, { volume: 'nsid1', ops: 64, bytes: 4 * MiB, zeroCopy: true, reconnects: 0, interrupted: false });
  // Sequential 64 KiB writes of incompressible data over the first 4 MiB: no block left zero.
  const written = fileBytes(dmn.file, 0, 4 * MiB);
  for (let at = 0; at < written.length; at += 4096) {
    if (written.subarray(at, at + 4096).equals(Buffer.alloc(4096))) return t.fail(`the 4 KiB at ${at} were not written`);
  }

  for (const extra of [[], ['--no-zero-copy']]) {
    const r = await rblk(['bench', dmn.url('?sqflow=off'), '--json', '--rw', 'mixed', '--mix', '50', '--bs', '4k', '--qd', '8', '--size', '2m', '--yes', ...extra]);
    t.is(r.code, 0, r.stderr);
    const j = JSON.parse(r.out) as { ops: number; bytes: number; read: { ops: number }; write: { ops: number }; zeroCopy: boolean };
    t.is(j.ops, 512);
    t.is(j.bytes, 2 * MiB);
    t.is(j.read.ops + j.write.ops, 512);
    t.is(j.zeroCopy, extra.length === 0);
  }
  const text = await rblk(['bench', dmn.url(), '--size', '1m', '--bs', '8k', '--qd', '2', '--seed', '7']);
  t.is(text.code, 0, text.stderr);
  t.regex(text.out, /^nsid1: rand read, bs 8 KiB, qd 2, /);
  t.regex(text.out, /ops:\s+128 /);
});
