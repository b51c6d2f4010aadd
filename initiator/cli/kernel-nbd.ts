// Connects the kernel's NBD client (/dev/nbdN) to our NBD server with
// nbd-client(8): it does the handshake and hands the socket to the nbd
// driver. The driver takes simple replies only, which is all nbd-client
// negotiates (protocol-facts.md §5).
import { execFile } from 'node:child_process';
import { accessSync, constants, existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import type { NbdAddress } from '../nbd/index.js';

function onPath(cmd: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const p = join(dir, cmd);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // not in this directory
    }
  }
  return undefined;
}

function run(cmd: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { encoding: 'utf8' }, (err, _stdout, stderr) => {
      if (err === null) resolve();
      else reject(new Error(`${[cmd, ...args].join(' ')} failed: ${stderr.trim() || err.message}`));
    });
  });
}

/** Why /dev/nbdN cannot be used here, or undefined when it can. */
export function kernelNbdProblem(device: string): string | undefined {
  if (!/^\/dev\/nbd\d+$/.test(device)) return `${device} is not an NBD device (expected /dev/nbdN)`;
  if (!existsSync('/sys/module/nbd')) return 'the nbd kernel module is not loaded (modprobe nbd), so there is no /dev/nbdN';
  if (!existsSync(device)) return `${device} does not exist (the nbd module was loaded with fewer devices: modprobe nbd nbds_max=N)`;
  if (onPath('nbd-client') === undefined) return 'nbd-client is not installed (Debian: apt-get install nbd-client)';
  return undefined;
}

export async function connectKernelNbd(device: string, where: NbdAddress, exportName: string, blockSize: number): Promise<void> {
  const server = where.path !== undefined ? ['-unix', where.path] : ['127.0.0.1', String(where.port)];
  await run('nbd-client', ['-N', exportName, '-b', String(blockSize), ...server, device]);
}

export async function disconnectKernelNbd(device: string): Promise<void> {
  await run('nbd-client', ['-d', device]);
}
