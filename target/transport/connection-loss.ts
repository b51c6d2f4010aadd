// Whether a failed RDMA transfer or send means the initiator went away (it closed, crashed or
// was cut off) rather than that it broke the protocol (a bad key or descriptor): the one place
// the target decides it, for the JavaScript path's commands and the fast path's alike. A loss
// ends the connection as a disconnect does and is logged at info as "connection lost"; only
// the rest is a protocol violation (docs/protocol.md §15, docs/operations.md "Logs and the journal").
import { getSystemErrorName } from 'node:util';

/**
 * errno names of a peer that is gone or unreachable: libfabric's FI_E* mirror them (fi_errno.h).
 * ECANCELED too: rblkd cancels no transfer of a live connection, so one the provider cancelled
 * went down with an endpoint the peer's end shut (seen on the fast path before the transport's
 * own shutdown event arrives).
 */
const LOSS = new Set(['ENOTCONN', 'ECONNRESET', 'EPIPE', 'ECONNABORTED', 'ESHUTDOWN', 'ECANCELED', 'ECONNREFUSED', 'EHOSTUNREACH', 'EHOSTDOWN', 'ENETUNREACH', 'ENETDOWN', 'ENETRESET']);

function nameOf(errno: number): string | undefined {
  try {
    return getSystemErrorName(-Math.abs(errno));
  } catch {
    return undefined;
  }
}

/** The errno name a cause carries: an errno (either sign), a name (`ENOTCONN`, `FI_ENOTCONN`), or an error with .code or .errno. */
function errnoNameOf(cause: unknown): string | undefined {
  if (typeof cause === 'number') return nameOf(cause);
  if (typeof cause === 'string') return cause.replace(/^FI_/, '');
  if (typeof cause === 'object' && cause !== null) {
    const { code, errno } = cause as { code?: unknown; errno?: unknown };
    if (typeof code === 'string' && code !== '') return code.replace(/^FI_/, '');
    if (typeof errno === 'number') return nameOf(errno);
  }
  return undefined;
}

/**
 * True when a transfer or send that failed with `cause` means the connection is lost: the
 * errno says the peer is gone, or `transportGone` says the transport already knew it (then
 * whatever the provider reports, a cancelled operation or an I/O error, follows from that).
 */
export function isConnectionLoss(cause: unknown, transportGone = false): boolean {
  if (transportGone) return true;
  const name = errnoNameOf(cause);
  return name !== undefined && LOSS.has(name);
}
