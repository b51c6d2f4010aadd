// Attaches a file to a loop device for the block-device tests, and detaches it
// when the test ends, passed or failed.
import type { ExecutionContext } from 'ava';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

export const run = promisify(execFile);

export async function attachLoop(t: ExecutionContext, file: string, ...args: string[]): Promise<string> {
  let device: string;
  try {
    device = (await run('losetup', ['--find', '--show', ...args, file])).stdout.trim();
  } catch (err) {
    throw new Error(`losetup --find --show ${[...args, file].join(' ')} failed: ${(err as Error).message.trim()}`);
  }
  t.teardown(async () => {
    await run('losetup', ['--detach', device]);
  });
  return device;
}
