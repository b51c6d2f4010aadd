// Runs test/fixtures/close-in-flight.ts in a child process, so that "the
// process exits by itself" is observed rather than assumed, and a crash is a
// failed test instead of a dead test worker.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const fixture = fileURLToPath(new URL('../../fixtures/close-in-flight.ts', import.meta.url));

export interface CloseInFlightRun {
  /** The exit code; null when a signal ended it (named in output). */
  exit: number | null;
  /** The child's stderr, and the signal that ended it if one did. */
  output: string;
  /** The fixture's closing JSON line. */
  report: { settled?: number; withData?: number; codes?: Record<string, number> } | null;
}

export function closeInFlight(provider: string, mode?: 'arriving'): Promise<CloseInFlightRun> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import=tsx', fixture, provider, ...(mode === undefined ? [] : [mode])], { timeout: 60_000 }, (err, stdout, stderr) => {
      const e = err as (Error & { code?: number | string; signal?: string }) | null;
      const exit = e === null ? 0 : typeof e.code === 'number' ? e.code : null;
      const last = stdout.trim().split('\n').pop() ?? '';
      let report: CloseInFlightRun['report'] = null;
      try {
        report = JSON.parse(last) as CloseInFlightRun['report'];
      } catch {
        report = null;
      }
      resolve({ exit, output: `${e?.signal !== undefined && e.signal !== null ? `ended by ${e.signal}\n` : ''}${stderr}`, report });
    });
  });
}
