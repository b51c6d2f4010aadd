import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { ExecutionContext } from 'ava';

/** A fresh directory under os.tmpdir(), removed when the test ends. */
export function tempDir(t: ExecutionContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'rblk-config-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Writes a file (making its directory) with the given mode; returns its path. */
export function put(dir: string, rel: string, content: string | Buffer, mode = 0o644): string {
  const path = join(dir, rel);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, content);
  chmodSync(path, mode);
  return path;
}
