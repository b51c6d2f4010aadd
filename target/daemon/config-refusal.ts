// A start refused for a reason in the configuration that --check-config could not see
// beforehand (a volume's file removed since, a directory the unit's sandbox makes read-only):
// rblkd exits 78 (EX_CONFIG) rather than 1, so that systemd's RestartPreventExitStatus=78 stops
// it from restarting into the same refusal (docs/operations.md "Exit statuses").
import { errorText } from '../error-text.js';

/**
 * errno codes of an open or mkdir that only a change to the file or the host can fix; and
 * of a clone_of that the filesystem cannot reflink (EOPNOTSUPP, EXDEV: target/backend/reflink.ts).
 */
const CONFIG_CODES = new Set(['ENOENT', 'ENOTDIR', 'EISDIR', 'EACCES', 'EPERM', 'EROFS', 'ELOOP', 'ENAMETOOLONG', 'ENXIO', 'ENODEV', 'EOPNOTSUPP', 'EXDEV']);

export class ConfigRefusal extends Error {
  readonly code: string;

  constructor(message: string, code: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

function codeOf(e: unknown): string | undefined {
  const code = typeof e === 'object' && e !== null && 'code' in e ? (e as { code: unknown }).code : undefined;
  return typeof code === 'string' ? code : undefined;
}

/**
 * `e` as a ConfigRefusal saying `what` failed, when its errno is one of a configuration's
 * (a missing file, a read-only or non-directory parent, no permission); otherwise `e` itself.
 */
export function asConfigRefusal(what: string, e: unknown): unknown {
  if (e instanceof ConfigRefusal) return e;
  const code = codeOf(e);
  if (code === undefined || !CONFIG_CODES.has(code)) return e;
  return new ConfigRefusal(`${what}: ${errorText(e)}`, code, { cause: e });
}
