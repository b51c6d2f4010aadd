// When a reload removes a volume, sessions stop seeing its LUN at once, but
// commands they had already started on it still hold its logical unit and may
// not have reached the backend yet (waiting for a data buffer, or for the
// RDMA READ of their data). The backend may close only when those are done:
// every such command was outstanding at the moment of removal, and
// ServedConnection.settled(lun) resolves when those have responded.
import type { ServedConnection } from '../connection/environment.js';

export type QuiesceConnection = Pick<ServedConnection, 'settled'>;

/** Resolves true once every session's commands on the LUN have settled, false if timeoutMs passed first. */
export async function quiesce(sessions: readonly QuiesceConnection[], lun: number, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | null = null;
  const deadline = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
  try {
    return await Promise.race([Promise.all(sessions.map((s) => s.settled(lun))).then(() => true as const), deadline]);
  } finally {
    if (timer) clearTimeout(timer);
  }
}
