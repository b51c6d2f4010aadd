import test from 'ava';
import { stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { FileBackend } from '../../target/backend/file.js';
import { MemoryBackend } from '../../target/backend/memory.js';
import { openBackend } from '../../target/backend/open.js';
import { expectCode, pattern, tempDir } from './helpers.js';

const MiB = 1 << 20;

test('open: memory: specs make a RAM volume', async (t) => {
  const backend = await openBackend({ path: 'memory:scratch', size: 4 * MiB });
  t.teardown(() => backend.close());
  t.true(backend instanceof MemoryBackend);
  t.is(backend.size, 4 * MiB);
  await backend.write(pattern(4096, 1), 4096);
  const got = Buffer.alloc(4096);
  await backend.read(got, 4096);
  t.true(got.equals(pattern(4096, 1)));
  await expectCode(t, backend.write(Buffer.alloc(1), 4 * MiB), 'EINVAL', /^memory volume scratch: write of 1 bytes at offset 4194304 goes past the end/);
});

test('open: a memory volume needs a size', async (t) => {
  await expectCode(t, openBackend({ path: 'memory:' }), 'EINVAL', /^a memory volume \(memory:\) needs a size$/);
});

test('open: a missing path with a size becomes a new file', async (t) => {
  const path = join(await tempDir(t), 'fresh.img');
  const backend = await openBackend({ path, size: 2 * MiB });
  t.teardown(() => backend.close());
  t.true(backend instanceof FileBackend);
  t.is((await stat(path)).size, 2 * MiB);
});

test('open: an existing file opens as a file, read-only when asked', async (t) => {
  const path = join(await tempDir(t), 'existing.img');
  await writeFile(path, pattern(MiB, 2));
  const backend = await openBackend({ path, readOnly: true });
  t.teardown(() => backend.close());
  t.true(backend instanceof FileBackend);
  t.true(backend.readOnly);
  t.is(backend.size, MiB);
  const got = Buffer.alloc(MiB);
  await backend.read(got, 0);
  t.true(got.equals(pattern(MiB, 2)));
});

test('open: a missing path without a size, and other kinds of file, are refused', async (t) => {
  await expectCode(t, openBackend({ path: join(await tempDir(t), 'none.img') }), 'ENOENT');
  await expectCode(t, openBackend({ path: '/dev/null' }), 'EINVAL', /^\/dev\/null: neither a regular file nor a block device$/);
  await expectCode(t, openBackend({ path: await tempDir(t) }), 'EINVAL', /neither a regular file nor a block device/);
});
