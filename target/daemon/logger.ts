// rblkd's log: winston, to stderr, or to the journal. The level and the
// format (text or json) come from the config's `logging` section and change on
// reload. Sessions log through the same logger with their session id,
// initiator name and peer address as fields (target/rblk/connection.ts adds
// them), so every session line can be found by any of them.
//
// Under journald (JOURNAL_STREAM names the file stderr is: systemd.exec(5))
// every line carries its priority. Through libsystemd (the optional
// rblk_systemd addon) each line is one journal entry, sd_journal_sendv(3),
// with PRIORITY= and the fields upper-cased (SESSION=, PEER=, VOLUME=...), so
// `journalctl -u rblkd PEER=10.0.0.5:41234` finds them; without the addon, or
// with RBLK_JOURNAL=stream, the stream protocol's `<N>` prefix gives the
// priority (sd-daemon(3)); so does a journal socket that is missing or refuses
// a line, said once. docs/operations.md "Logs and the journal".
import { fstatSync, statSync, writeSync } from 'node:fs';
import winston, { createLogger, format, type Logger } from 'winston';
import type { LogFormat, LogLevel, LoggingConfig } from '../../config/schema.js';
import { systemdAddon } from '../../native/binding.js';

export type DaemonLogger = Logger;

const LEVELS: readonly LogLevel[] = ['error', 'warn', 'info', 'debug'];
/** syslog(3) priorities: LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG. */
const PRIORITY: Readonly<Record<string, number>> = { error: 3, warn: 4, info: 6, debug: 7 };

/** Fields that identify what a line is about come first, in this order. */
const FIELD_ORDER = ['session', 'initiator', 'peer', 'connection', 'volume', 'lun', 'listener'];
/** Fields that are numbers in every line that has them (JSON logs compare them by type). */
const NUMERIC_FIELDS = ['session', 'connection', 'lun'];

const MESSAGE = Symbol.for('message');

function fieldText(value: unknown): string {
  const s = typeof value === 'string' ? value : JSON.stringify(value);
  return /^[^\s"=]+$/.test(s ?? '') ? (s ?? '') : JSON.stringify(s);
}

/** One type per field: a session id is a number whichever layer logged it (the SCSI core has it as a string). */
const normalizeFields = format((info) => {
  for (const k of NUMERIC_FIELDS) {
    const v = info[k];
    if (typeof v === 'string' && /^\d+$/.test(v) && Number.isSafeInteger(Number(v))) info[k] = Number(v);
    else if (typeof v === 'bigint') info[k] = Number(v);
  }
  return info;
});

/**
 * One line per event: `info: logged in: 32 credits session=3 initiator=host-a`.
 * The journal timestamps every line itself, so a timestamp is written only when run by hand.
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

/**
 * Whether stderr is the journal's stream: JOURNAL_STREAM is "device:inode" of
 * it, and a child that inherited the variable but not the fd must not believe it.
 */
export function stderrIsJournal(env: NodeJS.ProcessEnv = process.env): boolean {
  const want = env.JOURNAL_STREAM;
  if (want === undefined || want === '') return false;
  try {
    const st = fstatSync(2);
    return `${st.dev}:${st.ino}` === want;
  } catch {
    return false;
  }
}

function formatFor(kind: LogFormat, journal: boolean): ReturnType<typeof format.combine> {
  if (kind === 'json') return format.combine(normalizeFields(), format.timestamp(), format.json());
  return format.combine(normalizeFields(), format.timestamp(), textFormat(!journal));
}

/** Journal field names: upper case letters, digits and underscores, not starting with one (systemd.journal-fields(7)). */
function journalName(key: string): string | null {
  const n = key.toUpperCase().replace(/[^A-Z0-9_]/g, '_');
  return /^[A-Z][A-Z0-9_]{0,63}$/.test(n) ? n : null;
}

/** winston-transport's base class: winston exports it as `Transport`, its typings as `transport`. */
const TransportBase = (winston as unknown as { Transport: typeof winston.transport }).Transport;

type JournalSend = (fields: readonly string[]) => number;

/** Where sd_journal_sendv(3) sends, fixed in libsystemd. */
const JOURNAL_SOCKET = '/run/systemd/journal/socket';

function journalSocketPresent(): boolean {
  return statSync(JOURNAL_SOCKET, { throwIfNoEntry: false })?.isSocket() ?? false;
}

/** The native journal, when running under journald with the addon; null for the stream protocol. */
function nativeJournal(env: NodeJS.ProcessEnv): JournalSend | null {
  if (env.RBLK_JOURNAL === 'stream') return null;
  try {
    const a = systemdAddon();
    return typeof a.sdJournalSend === 'function' ? (f) => a.sdJournalSend(f) : null;
  } catch {
    // No rblk_systemd.node: the stream protocol carries the priority.
    return null;
  }
}

/**
 * Writes each formatted line: to the journal natively (one entry with its
 * fields), or to stderr, with the `<N>` priority prefix on every line when
 * stderr is the journal's stream. Synchronous, so a crash handler's last line
 * is out before exit.
 */
class DaemonTransport extends TransportBase {
  constructor(
    private readonly journal: boolean,
    private send: JournalSend | null,
  ) {
    super();
  }

  override log(info: Record<string | symbol, unknown>, next: () => void): void {
    const level = String(info.level);
    const line = String(info[MESSAGE]);
    const priority = PRIORITY[level] ?? 6;
    if (this.send && this.toJournal(info, line, priority)) return next();
    const out = this.journal ? line.split('\n').map((l) => `<${priority}>${l}`).join('\n') : line;
    writeSync(2, `${out}\n`);
    next();
  }

  private toJournal(info: Record<string | symbol, unknown>, line: string, priority: number): boolean {
    const fields = [`MESSAGE=${line}`, `PRIORITY=${priority}`, 'SYSLOG_IDENTIFIER=rblkd'];
    for (const [k, v] of Object.entries(info)) {
      if (k === 'level' || k === 'message' || k === 'timestamp' || v === undefined) continue;
      const name = journalName(k);
      if (name !== null) fields.push(`${name}=${typeof v === 'string' ? v : JSON.stringify(v)}`);
    }
    // sd_journal_sendv reports success when the socket does not exist (libsystemd drops the
    // entry and returns 0 on ENOENT), so its absence is checked here, before every entry.
    if (!journalSocketPresent()) return this.toStream(`the native journal is unavailable (no socket at ${JOURNAL_SOCKET})`);
    const r = this.send!(fields);
    if (r >= 0) return true;
    // The journal socket refused (it is gone, or full).
    return this.toStream(`the native journal refused a line (errno ${-r})`);
  }

  /** From now on the stream carries the priority; said once, on the stream. Returns false: this line goes there too. */
  private toStream(why: string): false {
    this.send = null;
    writeSync(2, `<4>warn: ${why}; using the stream protocol\n`);
    return false;
  }
}

export function createDaemonLogger(config: LoggingConfig = { level: 'info', format: 'text' }, env: NodeJS.ProcessEnv = process.env): DaemonLogger {
  const journal = stderrIsJournal(env);
  return createLogger({
    level: config.level,
    levels: Object.fromEntries(LEVELS.map((l, i) => [l, i])),
    format: formatFor(config.format, journal),
    // Every level to stderr (or the journal): stdout is for --check-config's answer.
    transports: [new DaemonTransport(journal, journal ? nativeJournal(env) : null)],
  });
}

/** A reload changed `logging`: the next line uses the new level and format. */
export function reconfigureLogger(logger: DaemonLogger, config: LoggingConfig): void {
  logger.level = config.level;
  logger.format = formatFor(config.format, stderrIsJournal());
}

/** The error's message alone, for operational failures (an errno, a refused bind). */
/** The error's stack (or message), for a log line that must say where it came from. */
export function describeError(e: unknown): string {
  if (e instanceof Error) return e.stack ?? `${e.name}: ${e.message}`;
  return String(e);
}
