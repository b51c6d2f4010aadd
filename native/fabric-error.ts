// Every libfabric failure surfaces as a FabricError: .code ('FI_ECONNREFUSED'),
// .errno (positive) and .op (the libfabric call), as zeromq.js does for ZMQ.
import { addon } from './binding.js';

export class FabricError extends Error {
  readonly code: string;
  readonly errno: number;
  readonly op: string;

  constructor(errno: number, op: string, message?: string, code?: string) {
    const name = code ?? addon().errorName(errno);
    super(message ?? `${op}: ${addon().errorMessage(errno)} (${name})`);
    this.name = 'FabricError';
    this.code = name;
    this.errno = errno;
    this.op = op;
  }

  /** Native throws plain Errors with code/errno/op; give them the class. */
  static from(err: unknown): FabricError | Error {
    if (err instanceof FabricError) return err;
    if (err instanceof Error && typeof (err as { code?: unknown }).code === 'string') {
      const e = err as Error & { code: string; errno?: number; op?: string };
      const fe = new FabricError(e.errno ?? 0, e.op ?? 'native', e.message, e.code);
      fe.stack = e.stack;
      return fe;
    }
    return err instanceof Error ? err : new Error(String(err));
  }
}

/** libfabric errno values rblk names directly (fi_errno.h mirrors errno.h). */
export const FI_EAGAIN = 11;
export const FI_ECANCELED = 125;
export const FI_ESHUTDOWN = 108;
export const FI_ETIMEDOUT = 110;
export const FI_ECONNREFUSED = 111;
export const FI_EOPNOTSUPP = 95;
