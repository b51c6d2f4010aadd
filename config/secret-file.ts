// An initiator's HMAC secret kept out of the main config file. The file must be private to the
// daemon: a secret that others can read lets them log in as that initiator, and one that others
// can write lets them choose it.

import { readFileSync, statSync } from 'node:fs';

export type SecretResult = { ok: true; secret: string } | { ok: false; message: string };

/**
 * Reads a secret file after checking it is a regular file, mode 0600 or stricter, and owned by
 * `uid` (skipped when uid is undefined, as it is for root, who can read any file anyway).
 * One trailing line break is dropped, since editors and `echo` add one.
 */
export function readSecretFile(path: string, uid: number | undefined): SecretResult {
  let st;
  try {
    st = statSync(path);
  } catch (e) {
    return { ok: false, message: `secret_file ${path} ${describeFsError(e)}` };
  }
  if (!st.isFile()) return { ok: false, message: `secret_file ${path} is not a regular file` };
  const mode = st.mode & 0o777;
  const octal = mode.toString(8).padStart(4, '0');
  if (mode & 0o044) {
    return { ok: false, message: `secret_file ${path} must not be readable by group or others (mode ${octal})` };
  }
  if (mode & 0o033) {
    return {
      ok: false,
      message: `secret_file ${path} must not be writable or executable by group or others (mode ${octal})`,
    };
  }
  if (uid !== undefined && st.uid !== uid) {
    return {
      ok: false,
      message: `secret_file ${path} must be owned by the daemon's user (uid ${uid}), not uid ${st.uid}`,
    };
  }
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    return { ok: false, message: `secret_file ${path} ${describeFsError(e)}` };
  }
  return { ok: true, secret: text.replace(/\r?\n$/, '') };
}

/** "does not exist", "cannot be read (permission denied)", ... from a Node fs error. */
export function describeFsError(e: unknown): string {
  const code = typeof e === 'object' && e !== null && 'code' in e ? String((e as { code: unknown }).code) : '';
  switch (code) {
    case 'ENOENT':
      return 'does not exist';
    case 'EACCES':
    case 'EPERM':
      return 'cannot be read (permission denied)';
    case 'ENOTDIR':
      return 'does not exist (a parent is not a directory)';
    default:
      return `cannot be read (${e instanceof Error ? e.message : String(e)})`;
  }
}
