import test from 'ava';
import { closeSync, constants, openSync, readSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PAGE, SLOT_BYTES, withScratch } from '../../target/scsi/scratch.js';

test('scratch buffers are page-aligned slices that go back to the pool', async (t) => {
  let first: Buffer | undefined;
  await withScratch(8192, async (b) => {
    first = b;
    t.is(b.length, 8192);
    t.is(b.byteOffset % PAGE, 0);
    // A second one in flight at the same time is a different slot.
    await withScratch(SLOT_BYTES, async (c) => {
      t.is(c.byteOffset % PAGE, 0);
      t.false(c.byteOffset === b.byteOffset && c.buffer === b.buffer);
    });
  });
  await withScratch(512, async (again) => {
    t.true(again.buffer === first?.buffer, 'a released slot is reused');
  });
  await withScratch(SLOT_BYTES + 1, async (big) => t.is(big.length, SLOT_BYTES + 1));
});

test('O_DIRECT reads into scratch memory succeed where the filesystem supports O_DIRECT', async (t) => {
  const path = join(tmpdir(), `rblk-scratch-${process.pid}`);
  writeFileSync(path, Buffer.alloc(65536, 0x5a));
  t.teardown(() => unlinkSync(path));
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_DIRECT);
  } catch {
    t.pass('no O_DIRECT on this filesystem; alignment was checked above');
    return;
  }
  try {
    await withScratch(65536, async (b) => {
      t.is(readSync(fd, b, 0, 65536, 0), 65536);
      t.true(b.every((x) => x === 0x5a));
    });
  } finally {
    closeSync(fd);
  }
});
