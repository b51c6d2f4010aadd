// The reconnect backoff (docs/initiator.md "Reconnecting and the loss
// timeout"): exponential with full jitter. The window doubles from the first
// delay up to the cap, and each delay is drawn uniformly from [0, window], so
// the initiators of a restarted target do not come back in lockstep, and the
// gap between two attempts never exceeds the cap.

/** The delay before reconnect attempt `attempt` (0 = the first after the loss). */
export function reconnectDelay(attempt: number, initialMs: number, maxMs: number, random: () => number = Math.random): number {
  const window = Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30));
  return Math.round(random() * window);
}
