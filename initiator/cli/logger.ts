// Diagnostics of long-running commands (attach, mount) on stderr, one line
// each: stdout is kept for results, and for read's data.
import type { NbdLog } from '../nbd/index.js';
import type { FuseLogger } from '../fuse/index.js';

export type CliLogLevel = 'error' | 'warn' | 'info' | 'debug';

const RANK: Record<CliLogLevel, number> = { error: 0, warn: 1, info: 2, debug: 3 };

export class CliLogger implements FuseLogger {
  readonly level: CliLogLevel;
  readonly #out: NodeJS.WritableStream;
  readonly #stamp: boolean;

  /** stamp: prefix a time and the pid (for the log file of a detached mount). */
  constructor(level: CliLogLevel, out: NodeJS.WritableStream = process.stderr, stamp = false) {
    this.level = level;
    this.#out = out;
    this.#stamp = stamp;
  }

  log(level: CliLogLevel, message: string, meta?: Record<string, unknown>): void {
    if (RANK[level] > RANK[this.level]) return;
    const fields = meta === undefined ? '' : Object.entries(meta).map(([k, v]) => ` ${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`).join('');
    const prefix = this.#stamp ? `${new Date().toISOString()} [${process.pid}] ` : 'rblk: ';
    this.#out.write(`${prefix}${level === 'info' ? '' : `${level}: `}${message}${fields}\n`);
  }

  error(message: string, meta?: Record<string, unknown>): void {
    this.log('error', message, meta);
  }
  warn(message: string, meta?: Record<string, unknown>): void {
    this.log('warn', message, meta);
  }
  info(message: string, meta?: Record<string, unknown>): void {
    this.log('info', message, meta);
  }
  debug(message: string, meta?: Record<string, unknown>): void {
    this.log('debug', message, meta);
  }

  /** The same sink for NbdServer. */
  readonly nbd: NbdLog = (level, msg) => this.log(level, msg);
}
