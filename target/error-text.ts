// The message of something thrown, for a log line or a reason that names what failed:
// one definition for the target's session, command and transport layers.
export function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
