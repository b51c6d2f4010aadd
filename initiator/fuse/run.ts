// Runs a system tool (losetup, mkfs, mount) without blocking the event loop:
// the FUSE file those tools touch is served by this very thread.
import { execFile } from 'node:child_process';

export class CommandError extends Error {
  readonly command: string;
  readonly exitCode: number | null;
  readonly stderr: string;

  constructor(command: string, exitCode: number | null, stderr: string, cause: unknown) {
    super(`${command} failed${exitCode === null ? '' : ` (exit ${exitCode})`}: ${stderr.trim() || String(cause)}`, { cause });
    this.name = 'CommandError';
    this.command = command;
    this.exitCode = exitCode;
    this.stderr = stderr;
  }
}

/** Resolves stdout; rejects with a CommandError that quotes stderr. */
export function run(cmd: string, args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, [...args], { encoding: 'utf8' }, (err, stdout, stderr) => {
      if (err === null) {
        resolve(stdout);
        return;
      }
      const code = typeof err.code === 'number' ? err.code : null;
      reject(new CommandError([cmd, ...args].join(' '), code, stderr, err));
    });
  });
}
