// The initiator's half of protocol version negotiation (docs/protocol.md §3):
// ask for the highest version, and when the target refuses it with REJECT
// reason 1 (unsupported version), ask again with the version the REJECT
// names. A REJECT that arrives without its private data (the sockets provider
// drops it, docs/transport.md "Connections") is retried once with version 1,
// which every target speaks: whatever else it was, the second refusal says so.
import {
  ConnectKind,
  ConnectRejectReason,
  decodeConnectData,
  MIN_PROTOCOL_VERSION,
  PROTOCOL_VERSION,
} from '../../protocol/wire/index.js';
import { FabricError } from '../../native/fabric-error.js';

/** The version to ask for again after `e` refused `asked`, or null to give up. */
function retryVersion(e: unknown, asked: number): number | null {
  if (asked <= MIN_PROTOCOL_VERSION) return null;
  if (!(e instanceof FabricError) || e.code !== 'FI_ECONNREFUSED') return null;
  const pd = (e as FabricError & { privateData?: Buffer }).privateData;
  if (pd === undefined || pd.length === 0) return MIN_PROTOCOL_VERSION;
  let reject;
  try {
    reject = decodeConnectData(pd, ConnectKind.REJECT);
  } catch {
    return null;
  }
  if (reject.reason !== ConnectRejectReason.UNSUPPORTED_VERSION) return null;
  return reject.version >= MIN_PROTOCOL_VERSION && reject.version < asked ? reject.version : null;
}

/** Runs attempt(version) from `highest` (default PROTOCOL_VERSION) down, as the target's refusals say. */
export async function negotiateVersion<T>(highest: number | undefined, attempt: (version: number) => Promise<T>): Promise<T> {
  let version = Math.min(PROTOCOL_VERSION, Math.max(MIN_PROTOCOL_VERSION, highest ?? PROTOCOL_VERSION));
  for (;;) {
    try {
      return await attempt(version);
    } catch (e) {
      const next = retryVersion(e, version);
      if (next === null) throw e;
      version = next;
    }
  }
}

/** An ACCEPT must echo the version asked for (§3). */
export function checkAcceptVersion(asked: number, accepted: number | undefined): void {
  if ((accepted ?? MIN_PROTOCOL_VERSION) !== asked) {
    throw new FabricError(71, 'fi_connect', `the target accepted protocol version ${accepted} after a CONNECT for version ${asked}`, 'EPROTO');
  }
}
