// The service manager protocol (sd_notify(3), systemd.service Type=notify and
// Type=notify-reload): READY=1 once serving, RELOADING=1 with MONOTONIC_USEC
// around a reload, STOPPING=1 when the drain starts, STATUS= for
// `systemctl status`, and WATCHDOG=1 pings. Node's dgram cannot send on an
// AF_UNIX datagram socket, so the messages go through libsystemd in the addon.
// Without NOTIFY_SOCKET (run by hand) every call is a no-op.
import { FeatureUnavailableError, systemdAddon } from '../../native/binding.js';
import type { DaemonLogger } from './logger.js';

export interface Notifier {
  /** Sends one message of KEY=VALUE lines; false when there is no service manager to hear it. */
  send(fields: Readonly<Record<string, string | number>>): boolean;
}

/**
 * CLOCK_MONOTONIC in µs, as systemd ≥ 253 wants next to RELOADING=1. Node's
 * hrtime is libuv's uv_hrtime(), which reads clock_gettime(CLOCK_MONOTONIC)
 * on Linux; checked against Python's time.clock_gettime_ns(CLOCK_MONOTONIC),
 * which fell between two hrtime readings taken around it.
 */
export function monotonicUsec(): bigint {
  return process.hrtime.bigint() / 1000n;
}

export function systemdNotifier(log: DaemonLogger): Notifier {
  let warned = false;
  return {
    send(fields) {
      const message = Object.entries(fields)
        .map(([k, v]) => `${k}=${String(v).replace(/\n/g, ' ')}`)
        .join('\n');
      let r: number;
      try {
        r = systemdAddon().sdNotify(message);
      } catch (e) {
        // Built or installed without libsystemd: with no service manager
        // listening that loses nothing; under one, say so once.
        if (!(e instanceof FeatureUnavailableError)) throw e;
        if (process.env.NOTIFY_SOCKET !== undefined && !warned) {
          warned = true;
          log.warn(`systemd will not hear from rblkd: ${e.message}`);
        }
        return false;
      }
      if (r < 0 && !warned) {
        // Once: a broken NOTIFY_SOCKET would otherwise repeat this every watchdog tick.
        warned = true;
        log.warn(`sd_notify failed (errno ${-r}); systemd will not hear from rblkd`);
      }
      return r > 0;
    },
  };
}

/**
 * The interval systemd asked for (WATCHDOG_USEC, for this process when
 * WATCHDOG_PID says so), in ms; null when there is no watchdog.
 */
export function watchdogIntervalMs(env: NodeJS.ProcessEnv = process.env): number | null {
  const usec = Number(env.WATCHDOG_USEC);
  if (!Number.isFinite(usec) || usec <= 0) return null;
  if (env.WATCHDOG_PID !== undefined && Number(env.WATCHDOG_PID) !== process.pid) return null;
  // sd_watchdog_enabled(3): ping at half the timeout.
  return Math.max(1, Math.floor(usec / 2 / 1000));
}

/**
 * Pings from the event loop, so a loop stuck for the whole WatchdogSec gets
 * the daemon restarted. The timer is unref'd: it never keeps rblkd alive.
 * Returns the function that stops it.
 */
export function startWatchdog(n: Notifier, env: NodeJS.ProcessEnv = process.env): () => void {
  const ms = watchdogIntervalMs(env);
  if (ms === null) return () => undefined;
  const timer = setInterval(() => n.send({ WATCHDOG: 1 }), ms);
  timer.unref();
  return () => clearInterval(timer);
}
