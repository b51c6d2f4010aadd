// The longest busy poll an endpoint takes, in µs (docs/architecture.md
// "Busy polling"): the library's busyPollMicros and rblkd's busy_poll_us stop
// here. Longer spins than a few wake-ups' worth only burn the core; 10 ms is
// already far past where a poll pays. Kept apart from fabric.ts so that the
// config schema can name it without loading the addon.
export const MAX_BUSY_POLL_US = 10_000;
