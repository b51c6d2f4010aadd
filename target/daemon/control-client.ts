// The client side of rblkd's control socket (control-server.ts): one request
// line, one answer line. `rblkd ctl` (bin-src/rblkd-ctl.ts) and the tests use it.
import { connect } from 'node:net';
import type { ControlCommand } from './control-server.js';

export class ControlError extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

/** Guards against a daemon that accepts and never answers; a reload may take a while (new volumes open). */
const ANSWER_MS = 60_000;

/**
 * Sends one request; resolves with its result, rejects with ControlError (the daemon's error, or why it could not be reached).
 * answerMs: how long to wait for the answer (a full copy of a large volume, `snapshot --copy`, takes longer than the default).
 */
export function controlRequest(path: string, command: ControlCommand, args: readonly string[] = [], answerMs = ANSWER_MS): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const s = connect(path);
    let buf = '';
    let settled = false;
    const finish = (f: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      s.destroy();
      f();
    };
    const timer = setTimeout(() => finish(() => reject(new ControlError(`no answer from ${path} within ${answerMs} ms`, 'ETIMEDOUT'))), answerMs);
    s.setEncoding('utf8');
    s.on('connect', () => s.write(`${JSON.stringify({ command, args })}\n`));
    s.on('data', (d: string) => {
      buf += d;
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      let answer: { ok?: boolean; result?: unknown; error?: string };
      try {
        answer = JSON.parse(buf.slice(0, nl)) as typeof answer;
      } catch {
        finish(() => reject(new ControlError(`${path} answered something that is not JSON`, 'EPROTO')));
        return;
      }
      finish(() => (answer.ok === true ? resolve(answer.result) : reject(new ControlError(answer.error ?? 'the daemon refused the request', 'EREFUSED'))));
    });
    s.on('error', (e: NodeJS.ErrnoException) => {
      const hint =
        e.code === 'ENOENT' || e.code === 'ECONNREFUSED'
          ? ' (is rblkd running? is control.socket set to another path?)'
          : e.code === 'EACCES'
            ? ' (run as root or as a member of the rblk group)'
            : '';
      finish(() => reject(new ControlError(`cannot reach rblkd at ${path}: ${e.message}${hint}`, e.code ?? 'EIO')));
    });
    s.on('end', () => finish(() => reject(new ControlError(`${path} closed the connection without answering`, 'EPIPE'))));
  });
}
