// How the CLI fails: one line on stderr and an exit status that tells a
// script what kind of failure it was (docs/cli.md "Exit status").
import { DEFAULT_STATE_DIR } from '../fuse/attachment-record.js';
import { RblkError } from '../errors.js';

export const EXIT_OK = 0;
/** The operation failed: unreachable target, I/O error, a verify mismatch. */
export const EXIT_FAILURE = 1;
/** The command line was wrong: unknown option, bad URL or size, unaligned offset, missing --yes. */
export const EXIT_USAGE = 2;

/** A mistake in the command line; reported without a stack trace, exit status 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** Ends the command with a status and no message (the reason was already reported, or needs none). */
export class QuietExit extends Error {
  readonly code: number;

  constructor(code: number, reason: string) {
    super(reason);
    this.name = 'QuietExit';
    this.code = code;
  }
}

/**
 * The exit status for an error. The library throws RangeError only for
 * arguments it refuses before sending anything (a malformed URL, an option out
 * of range), so those are usage errors too.
 */
export function exitCodeFor(e: unknown): number {
  if (e instanceof QuietExit) return e.code;
  return e instanceof UsageError || e instanceof RangeError ? EXIT_USAGE : EXIT_FAILURE;
}

/** The one line printed for an error (without the `rblk: ` prefix). */
export function describeError(e: unknown): string {
  if (e instanceof RblkError) return `${e.message} [${e.code}]`;
  const errno = e as NodeJS.ErrnoException & { address?: unknown };
  // A file call names its path; listen() on a Unix socket names it as the address.
  const path = typeof errno.path === 'string' ? errno.path : typeof errno.address === 'string' && errno.address.startsWith('/') ? errno.address : undefined;
  if ((errno.code === 'EACCES' || errno.code === 'EPERM') && path !== undefined) {
    // The default state directory is root's: say what to do instead of only the errno.
    const hint = path === DEFAULT_STATE_DIR || path.startsWith(`${DEFAULT_STATE_DIR}/`)
      ? `${DEFAULT_STATE_DIR} belongs to root: run this as root, or pass --state-dir DIR (or set RBLK_STATE_DIR) to a directory you own`
      : 'check its owner and mode';
    return `permission denied on ${path} (${errno.code}): ${hint}`;
  }
  if (e instanceof Error) return e.message;
  return String(e);
}
