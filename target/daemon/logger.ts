// rblkd's log: winston, to stderr, which systemd hands to the journal. The
// level and the format (text or json) come from the config's `logging` section
// and change on reload. Sessions log through the same logger with their
// session id and initiator name as fields (target/session/session.ts adds
// them), so every session line can be found by either.
import { createLogger, format, transports, type Logger } from 'winston';
import type { LogFormat, LogLevel, LoggingConfig } from '../../config/schema.js';

export type DaemonLogger = Logger;

const LEVELS: readonly LogLevel[] = ['error', 'warn', 'info', 'debug'];

/** Fields that identify what a line is about come first, in this order. */
const FIELD_ORDER = ['session', 'initiator', 'connection', 'volume', 'lun', 'listener'];

function fieldText(value: unknown): string {
  const s = typeof value === 'string' ? value : JSON.stringify(value);
  return /^[^\s"=]+$/.test(s ?? '') ? (s ?? '') : JSON.stringify(s);
}

/**
 * One line per event: `info: logged in: 32 credits session=3 initiator=host-a`.
 * The journal timestamps every line itself (JOURNAL_STREAM is set when stderr
 * is connected to it), so a timestamp is written only when run by hand.
 */
function textFormat(withTimestamp: boolean): ReturnType<typeof format.printf> {
  return format.printf((info) => {
    const { level, message, timestamp, stack, ...rest } = info;
    const keys = Object.keys(rest).sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
    const fields = keys.filter((k) => rest[k] !== undefined).map((k) => `${k}=${fieldText(rest[k])}`);
    const head = `${withTimestamp && typeof timestamp === 'string' ? `${timestamp} ` : ''}${level}: ${String(message)}`;
    const line = fields.length > 0 ? `${head} ${fields.join(' ')}` : head;
    return typeof stack === 'string' ? `${line}\n${stack}` : line;
  });
}

function rank(key: string): number {
  const i = FIELD_ORDER.indexOf(key);
  return i < 0 ? FIELD_ORDER.length : i;
}

function formatFor(kind: LogFormat): ReturnType<typeof format.combine> {
  if (kind === 'json') return format.combine(format.timestamp(), format.json());
  return format.combine(format.timestamp(), textFormat(process.env.JOURNAL_STREAM === undefined));
}

function consoleTransport(): InstanceType<typeof transports.Console> {
  // Every level to stderr: stdout is for --check-config's answer, and journald reads stderr.
  return new transports.Console({ stderrLevels: [...LEVELS] });
}

export function createDaemonLogger(config: LoggingConfig = { level: 'info', format: 'text' }): DaemonLogger {
  return createLogger({
    level: config.level,
    levels: Object.fromEntries(LEVELS.map((l, i) => [l, i])),
    format: formatFor(config.format),
    transports: [consoleTransport()],
  });
}

/** A reload changed `logging`: the next line uses the new level and format. */
export function reconfigureLogger(logger: DaemonLogger, config: LoggingConfig): void {
  logger.level = config.level;
  logger.format = formatFor(config.format);
}

/** The error's message alone, for operational failures (an errno, a refused bind). */
export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** The error's stack (or message), for a log line that must say where it came from. */
export function describeError(e: unknown): string {
  if (e instanceof Error) return e.stack ?? `${e.name}: ${e.message}`;
  return String(e);
}
