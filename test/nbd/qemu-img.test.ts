// qemu-img (qemu-utils) converts into and out of an export and compares.
import test from 'ava';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { firstDifference, randomFile, requireTool, run, runOk, serve, tempDir } from './helpers/harness.js';
import { MemoryDevice } from '../helpers/memory-device.js';

const MiB = 1024 * 1024;
const SIZE = 16 * MiB;

for (const [label, blockSize, unix] of [
  ['TCP, 512-byte blocks', 512, false],
  ['a unix socket, 4096-byte blocks', 4096, true],
] as const) {
  test(`qemu-img convert to and from an export, and compare, over ${label}`, async (t) => {
    requireTool('qemu-img', 'qemu-utils');
    const dir = await tempDir(t);
    const src = join(dir, 'src.img');
    const data = await randomFile(src, SIZE);
    const device = new MemoryDevice({ size: SIZE, blockSize, maxTransfer: 2 * MiB });
    device.load(0, Buffer.alloc(SIZE, 0xa5));
    const { uri } = await serve(t, new Map([['disk', device]]), { unix });

    await runOk(t, 'qemu-img', ['convert', '-n', '-f', 'raw', '-O', 'raw', src, uri('disk')]);
    t.is(firstDifference(device.contents(), data), -1, 'the export holds the source');
    t.true(
      device.calls.every((c) => c.offset % blockSize === 0 && c.length % blockSize === 0),
      'qemu kept to the advertised minimum block size',
    );

    const out = join(dir, 'out.img');
    await runOk(t, 'qemu-img', ['convert', '-f', 'raw', '-O', 'raw', uri('disk'), out]);
    t.is(firstDifference(await readFile(out), data), -1, 'the copy out matches');

    const same = await run(t, 'qemu-img', ['compare', '-f', 'raw', '-F', 'raw', src, uri('disk')]);
    t.is(same.code, 0, same.stderr);
    t.regex(same.stdout, /Images are identical/);

    // One changed byte must be seen, or compare proves nothing.
    device.load(5 * MiB, Buffer.alloc(blockSize, 0));
    const differ = await run(t, 'qemu-img', ['compare', '-f', 'raw', '-F', 'raw', src, uri('disk')]);
    t.is(differ.code, 1, differ.stderr);
    t.regex(differ.stdout, /Content mismatch at offset 5242880/);
  });
}
