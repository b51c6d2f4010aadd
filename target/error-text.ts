// The message of something thrown, for a log line or a reason that names what failed:
// one definition for the whole target: front ends, SCSI core, transports and the daemon.
export function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
