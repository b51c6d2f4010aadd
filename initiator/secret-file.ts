// The initiator's login secret, read from a file that only its owner can
// reach: a secret others can read lets them log in as this initiator.
import { readFileSync, statSync } from 'node:fs';
import { RblkError } from './errors.js';

/**
 * Reads a secret file: a regular file with mode 0600 or stricter (no group or
 * other bits at all). One trailing line break is dropped, as editors and
 * `echo` add one. Throws RblkError 'INVALID' naming the problem.
 */
export function readSecretFile(path: string): string {
  let mode: number;
  try {
    const st = statSync(path);
    if (!st.isFile()) throw new RblkError('INVALID', `secret file ${path} is not a regular file`);
    mode = st.mode & 0o777;
  } catch (e) {
    if (e instanceof RblkError) throw e;
    throw new RblkError('INVALID', `secret file ${path} cannot be read: ${(e as Error).message}`, { cause: e });
  }
  if ((mode & 0o077) !== 0) {
    const octal = mode.toString(8).padStart(4, '0');
    throw new RblkError('INVALID', `secret file ${path} has mode ${octal}; it must be 0600 or stricter (chmod 600 ${path})`);
  }
  try {
    return readFileSync(path, 'utf8').replace(/\r?\n$/, '');
  } catch (e) {
    throw new RblkError('INVALID', `secret file ${path} cannot be read: ${(e as Error).message}`, { cause: e });
  }
}
