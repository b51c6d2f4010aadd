// Loop devices over the FUSE file (losetup(8), loop(4)).
import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { run } from './run.js';

export interface LoopOptions {
  readOnly: boolean;
  /** The loop's logical block size: the volume's, so the loop never sends a partial block. */
  sectorSize: number;
  /**
   * Direct I/O from the loop to the file. On: the loop's reads and writes go
   * straight to FUSE (asynchronously, several in flight) instead of through a
   * second page cache, and the block layer's flush still ends as fsync → the
   * device's flush.
   */
  directIo: boolean;
}

/** `losetup --find --show`; resolves the device path (/dev/loopN). */
export async function attachLoop(file: string, opts: LoopOptions): Promise<string> {
  const args = ['--find', '--show', `--direct-io=${opts.directIo ? 'on' : 'off'}`, '--sector-size', String(opts.sectorSize)];
  if (opts.readOnly) args.push('--read-only');
  args.push(file);
  return (await run('losetup', args)).trim();
}

function sysfs(device: string, attr: string): string {
  return `/sys/block/${basename(device)}/loop/${attr}`;
}

/** The file behind a loop device, or null when it is not attached. */
export async function loopBackingFile(device: string): Promise<string | null> {
  try {
    return (await readFile(sysfs(device, 'backing_file'), 'utf8')).trim();
  } catch {
    return null;
  }
}

/** Whether the kernel really uses direct I/O on the backing file. */
export async function loopDirectIo(device: string): Promise<boolean> {
  try {
    return (await readFile(sysfs(device, 'dio'), 'utf8')).trim() === '1';
  } catch {
    return false;
  }
}

/**
 * Detaches device if it still backs file. The kernel may only mark it
 * autoclear while something still has it open; wait a little for the real
 * release so the file is no longer held when the FUSE mount goes away.
 */
export async function detachLoop(device: string, file: string): Promise<void> {
  if ((await loopBackingFile(device)) !== file) return;
  await run('losetup', ['--detach', device]);
  for (let i = 0; i < 40 && (await loopBackingFile(device)) === file; i++) await sleep(50);
}
