// nbdcopy (libnbd-bin) copies 64 MiB into an export and back out, over one
// connection and over four (multi-conn), and the bytes match.
import test, { type ExecutionContext } from 'ava';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { firstDifference, randomFile, requireTool, run, runOk, serve, tempDir } from './helpers/harness.js';
import { MemoryDevice } from '../helpers/memory-device.js';

const MiB = 1024 * 1024;
const SIZE = 64 * MiB;

/**
 * 64 MiB of random bytes with an 8 MiB run of zeroes in the middle, so the
 * zero-detecting path (WRITE_ZEROES or TRIM) is exercised too. Made once and
 * shared by the copies.
 */
let sourceImage: Promise<{ path: string; data: Buffer }> | null = null;
let sourceDir: string | null = null;

function source(): Promise<{ path: string; data: Buffer }> {
  sourceImage ??= (async () => {
    sourceDir = await mkdtemp(join(tmpdir(), 'rblk-nbdcopy-'));
    const path = join(sourceDir, 'source.img');
    const data = randomBytes(SIZE);
    data.fill(0, 24 * MiB, 32 * MiB);
    await writeFile(path, data);
    return { path, data };
  })();
  return sourceImage;
}

test.after.always(async () => {
  if (sourceDir !== null) await rm(sourceDir, { recursive: true, force: true });
});

async function copyInAndOut(t: ExecutionContext, connections: number, unix: boolean): Promise<void> {
  requireTool('nbdcopy', 'libnbd-bin');
  const dir = await tempDir(t);
  const { path, data } = await source();
  // Starts full of 0xa5, so zeroes the copy skipped would show.
  const device = new MemoryDevice({ size: SIZE, maxTransfer: 4 * MiB });
  device.load(0, Buffer.alloc(SIZE, 0xa5));
  const served = await serve(t, new Map([['disk', device]]), { unix });
  const uri = served.uri('disk');

  // nbdcopy opens no more connections than it has threads (one per core by default).
  const parallel = [`--connections=${connections}`, `--threads=${connections}`];
  await runOk(t, 'nbdcopy', [...parallel, '--flush', path, uri]);
  const stored = device.contents();
  t.is(firstDifference(stored, data), -1, 'the export holds the source bytes');
  t.true(device.calls.some((c) => c.op === 'flush'), '--flush reached the device');
  t.true(
    device.calls.some((c) => c.op === 'writeZeroes' && c.offset >= 24 * MiB && c.offset < 32 * MiB),
    'the zero run went as WRITE_ZEROES',
  );

  const out = join(dir, 'out.img');
  await runOk(t, 'nbdcopy', [...parallel, uri, out]);
  const copied = await readFile(out);
  t.is(firstDifference(copied, data), -1, 'the copy out matches the source');

  const opened = served.logs.filter((l) => l.msg.endsWith('serving export "disk"')).length;
  t.is(opened, 2 * connections, `${connections} connection(s) per copy`);
}

// Serial: each copy holds a few 64 MiB buffers, and they would only compete for the CPU.
test.serial('nbdcopy 64 MiB in and out over TCP, one connection', (t) => copyInAndOut(t, 1, false));

test.serial('nbdcopy 64 MiB in and out with --connections=4 (multi-conn)', (t) => copyInAndOut(t, 4, false));

test.serial('nbdcopy 64 MiB in and out over a unix socket, two connections', (t) => copyInAndOut(t, 2, true));

test('nbdcopy into a read-only export fails', async (t) => {
  requireTool('nbdcopy', 'libnbd-bin');
  const dir = await tempDir(t);
  const path = join(dir, 'small.img');
  await randomFile(path, MiB);
  const device = new MemoryDevice({ size: MiB, readOnly: true });
  const served = await serve(t, new Map([['ro', device]]));
  const result = await run(t, 'nbdcopy', [path, served.uri('ro')]);
  t.not(result.code, 0);
  t.regex(result.stderr, /read.?only|Operation not permitted/i);
  t.is(device.allocatedChunks, 0);
});
