// How rblkd reacts to signals and to errors nobody caught (docs/operations.md):
// SIGHUP reloads, SIGTERM and SIGINT drain, and a second one skips the drain.
// An uncaught exception or unhandled rejection leaves the process in a state
// no code was written for; rblkd logs it with its stack and exits 70
// (EX_SOFTWARE, sysexits.h) rather than carry on serving from it. Per-session
// failures never get here: each front end's connection confines them to itself.
import { describeError, type DaemonLogger } from './logger.js';

/** sysexits.h EX_SOFTWARE: an internal error. */
export const EX_SOFTWARE = 70;

export interface SignalHandlers {
  reload(): void;
  /** force: this is the second stop signal; stop waiting for the drain. */
  stop(force: boolean): void;
}

/** Installs the handlers; returns the function that removes them. */
export function installSignals(h: SignalHandlers): () => void {
  let stops = 0;
  const onHup = (): void => h.reload();
  const onStop = (): void => h.stop(stops++ > 0);
  process.on('SIGHUP', onHup);
  process.on('SIGTERM', onStop);
  process.on('SIGINT', onStop);
  return () => {
    process.off('SIGHUP', onHup);
    process.off('SIGTERM', onStop);
    process.off('SIGINT', onStop);
  };
}

/** Logs anything uncaught and exits EX_SOFTWARE; systemd's Restart=on-failure brings rblkd back. */
export function installCrashHandlers(log: DaemonLogger, exit: (code: number) => void = (c) => process.exit(c)): void {
  const die = (what: string) => (e: unknown) => {
    try {
      log.error(`${what}, exiting: ${describeError(e)}`);
    } finally {
      exit(EX_SOFTWARE);
    }
  };
  process.on('uncaughtException', die('uncaught exception'));
  process.on('unhandledRejection', die('unhandled promise rejection'));
}
