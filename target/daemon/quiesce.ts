// When a reload removes a volume, sessions stop seeing its LUN at once, but
// commands they had already started on it still hold its logical unit and may
// not have reached the backend yet (waiting for a data buffer, or for the
// RDMA READ of their data). The backend may close only when those are done.
// Every such command was outstanding at the moment of removal, so a session
// that has since been seen with nothing in flight, or that has ended, has no
// command left on the volume.
import type { TargetSession } from '../session/session.js';

const POLL_MS = 10;

export type QuiesceSession = Pick<TargetSession, 'commandsInFlight' | 'closed'>;

/** Resolves true once every session has drained or ended, false if timeoutMs passed first. */
export async function quiesce(sessions: readonly QuiesceSession[], timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | null = null;
  const deadline = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
  const timers: NodeJS.Timeout[] = [];
  const one = (s: QuiesceSession): Promise<void> =>
    s.commandsInFlight === 0
      ? Promise.resolve()
      : Promise.race([
          s.closed,
          new Promise<void>((resolve) => {
            const t = setInterval(() => {
              if (s.commandsInFlight === 0) {
                clearInterval(t);
                resolve();
              }
            }, POLL_MS);
            timers.push(t);
          }),
        ]);
  try {
    return await Promise.race([Promise.all(sessions.map(one)).then(() => true as const), deadline]);
  } finally {
    if (timer) clearTimeout(timer);
    for (const t of timers) clearInterval(t);
  }
}
