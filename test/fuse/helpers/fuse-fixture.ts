// Temporary directories for FUSE mounts, removed (after a lazy unmount if a
// test left one behind) when the test ends, passed or failed.
import type { ExecutionContext } from 'ava';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureUnmounted, listMounts } from '../../../native/fuse.js';

export async function tempDir(t: ExecutionContext, prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `rblk-${prefix}-`));
  t.teardown(async () => {
    await ensureUnmounted(dir);
    await rm(dir, { recursive: true, force: true });
  });
  return dir;
}

/** Mount points at or below root that this process can still see. */
export async function mountsUnder(root: string): Promise<string[]> {
  return (await listMounts()).map((m) => m.mountpoint).filter((p) => p === root || p.startsWith(`${root}/`));
}
