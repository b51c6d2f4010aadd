// rblkd's control socket (docs/operations.md "The control socket"): a Unix
// stream socket, mode 0660 with group rblk when that group exists (0600
// otherwise), speaking newline-delimited JSON: one request object per line,
// `{"command":"sessions"}` or `{"command":"kick","args":["3"]}`, one answer
// line each, `{"ok":true,"result":...}` or `{"ok":false,"error":"..."}`.
// A socket file left by an rblkd that died is removed at start; one that
// another rblkd still answers on is not taken. At exit it is closed and
// unlinked, if it is still ours.
import { errorText } from '../error-text.js';
import { chmodSync, chownSync, lstatSync, mkdirSync, readFileSync, statSync, unlinkSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { dirname } from 'node:path';
import type { DaemonLogger } from './logger.js';
import { describeError } from './logger.js';
import { ControlLineReader, type ControlLine } from './control-lines.js';

export const CONTROL_COMMANDS = ['status', 'sessions', 'volumes', 'kick', 'reload', 'snapshot', 'snapshots', 'delete-snapshot', 'clone', 'flatten'] as const;
export type ControlCommand = (typeof CONTROL_COMMANDS)[number];

export interface ControlHandlers {
  status(): unknown;
  sessions(): unknown;
  volumes(): unknown;
  kick(session: string): Promise<unknown>;
  /** force: remove volumes even while sessions can see them (`{"command":"reload","args":["force"]}`). */
  reload(force: boolean): Promise<unknown>;
  /** docs/operations.md "Snapshots and clones". */
  snapshot(volume: string, name: string, copy: boolean): Promise<unknown>;
  snapshots(volume: string): Promise<unknown>;
  deleteSnapshot(volume: string, name: string): Promise<unknown>;
  clone(ref: string, target: string, copy: boolean): Promise<unknown>;
  flatten(volume: string): Promise<unknown>;
}

export interface ControlRequest {
  command: ControlCommand;
  args?: string[];
}

/** A request line longer than this is refused (its bytes dropped): requests are a few dozen bytes. */
const MAX_REQUEST = 64 * 1024;
/** Requests read ahead of their answers on one connection before it is read no further. */
const MAX_QUEUED = 64;
/** How long the liveness probe of an existing socket waits for a connect. */
const PROBE_MS = 1000;

/** The rblk group's gid, from /etc/group, or null when there is none (no NSS lookup in Node). */
export function rblkGid(groupFile = '/etc/group'): number | null {
  let text: string;
  try {
    text = readFileSync(groupFile, 'utf8');
  } catch {
    return null;
  }
  for (const line of text.split('\n')) {
    const [name, , gid] = line.split(':');
    if (name === 'rblk' && gid !== undefined && /^\d+$/.test(gid)) return Number(gid);
  }
  return null;
}

/** Whether something accepts connections on the socket at `path`. */
function answers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(path);
    const done = (v: boolean): void => {
      clearTimeout(timer);
      s.destroy();
      resolve(v);
    };
    const timer = setTimeout(() => done(true), PROBE_MS);
    s.once('connect', () => done(true));
    s.once('error', () => done(false));
  });
}

/** A value named in an answer or a log line, short whatever its size or depth. */
function describeValue(v: unknown): string {
  if (v === undefined) return 'none';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'an object';
  if (typeof v === 'string') return JSON.stringify(v.length > 64 ? `${v.slice(0, 64)}...` : v);
  return `${typeof v} ${String(v).slice(0, 64)}`;
}

export class ControlSocketTaken extends Error {
  readonly code = 'ERR_RBLK_CONTROL_SOCKET_TAKEN';
}

export class ControlServer {
  private readonly connections = new Set<Socket>();
  private ino = -1;

  private constructor(
    readonly path: string,
    readonly mode: number,
    private readonly server: Server,
    private readonly handlers: ControlHandlers,
    private readonly log: DaemonLogger,
  ) {}

  /**
   * Binds the socket. Throws ControlSocketTaken when another process answers
   * on the path, or the bind's own error; a file there that is not a socket
   * is never removed.
   */
  static async open(path: string, handlers: ControlHandlers, log: DaemonLogger): Promise<ControlServer> {
    mkdirSync(dirname(path), { recursive: true, mode: 0o755 });
    let existing: ReturnType<typeof lstatSync> | undefined;
    try {
      existing = lstatSync(path);
    } catch {
      existing = undefined;
    }
    if (existing) {
      if (!existing.isSocket()) throw new Error(`${path} exists and is not a socket; not removing it`);
      if (await answers(path)) throw new ControlSocketTaken(`another process (an rblkd already running?) answers on ${path}`);
      log.info(`removing the stale control socket ${path}`);
      unlinkSync(path);
    }
    const gid = rblkGid();
    const mode = gid === null ? 0o600 : 0o660;
    // Half-open: a client may send its requests and shut down its side, and still read the answers.
    const server = createServer({ allowHalfOpen: true });
    const cs = new ControlServer(path, mode, server, handlers, log);
    server.on('connection', (s) => cs.serve(s));
    // A listening socket's errors after bind (none are expected) are logged, never thrown.
    server.on('error', (e) => log.error(`control socket ${path}: ${e.message}`));
    await new Promise<void>((resolve, reject) => {
      const fail = (e: Error): void => reject(e);
      server.once('error', fail);
      // umask could widen nothing, but could narrow; the mode is set explicitly just after.
      server.listen(path, () => {
        server.off('error', fail);
        resolve();
      });
    });
    try {
      if (gid !== null) chownSync(path, -1, gid);
      chmodSync(path, mode);
      cs.ino = statSync(path).ino;
    } catch (e) {
      await cs.close();
      throw e;
    }
    log.info(`control socket ${path} (mode ${mode.toString(8)}${gid !== null ? ', group rblk' : ''})`);
    return cs;
  }

  private serve(s: Socket): void {
    this.connections.add(s);
    s.on('close', () => this.connections.delete(s));
    s.on('error', () => s.destroy());
    const reader = new ControlLineReader(MAX_REQUEST);
    // One request at a time per connection, answered in order; `chain` never rejects.
    let chain: Promise<void> = Promise.resolve();
    let queued = 0;
    const resumeIfRoom = (): void => {
      if (queued < MAX_QUEUED && !s.writableNeedDrain && s.isPaused()) s.resume();
    };
    s.on('drain', resumeIfRoom);
    const enqueue = (lines: ControlLine[]): void => {
      for (const line of lines) {
        queued++;
        chain = chain.then(async () => {
          const answer = await this.reply(line);
          queued--;
          if (!s.destroyed && s.writable) s.write(answer);
          resumeIfRoom();
        });
      }
      // A client that sends faster than it reads waits for its answers (bounded memory).
      if (queued >= MAX_QUEUED || s.writableNeedDrain) s.pause();
    };
    s.on('data', (chunk: Buffer) => enqueue(reader.push(chunk)));
    // The client's half-close: its last line (even without a newline) is answered, then ours.
    s.on('end', () => {
      enqueue(reader.end());
      chain = chain.then(() => {
        if (!s.destroyed) s.end();
      });
    });
  }

  /** One line to its answer line; never rejects, whatever the line and the handlers do. */
  private async reply(line: ControlLine): Promise<string> {
    try {
      return `${JSON.stringify('refused' in line ? { ok: false, error: line.refused } : await this.answer(line.text))}\n`;
    } catch (e) {
      this.log.error(`control: internal error answering a request: ${describeError(e)}`);
      return `${JSON.stringify({ ok: false, error: `internal error: ${errorText(e)}` })}\n`;
    }
  }

  /** One request line to its answer. */
  private async answer(line: string): Promise<{ ok: true; result: unknown } | { ok: false; error: string }> {
    let req: unknown;
    try {
      req = JSON.parse(line);
    } catch {
      return { ok: false, error: 'the request is not JSON' };
    }
    if (req === null || typeof req !== 'object' || Array.isArray(req)) {
      return { ok: false, error: `a request is a JSON object such as {"command":"status"}, not ${describeValue(req)}` };
    }
    const command = (req as { command?: unknown }).command;
    const args = (req as { args?: unknown }).args ?? [];
    if (typeof command !== 'string' || !(CONTROL_COMMANDS as readonly string[]).includes(command)) {
      return { ok: false, error: `unknown command ${describeValue(command)}; one of ${CONTROL_COMMANDS.join(', ')}` };
    }
    if (!Array.isArray(args) || !args.every((a) => typeof a === 'string')) return { ok: false, error: 'args must be a list of strings' };
    this.log.debug(`control: ${command}${args.length > 0 ? ` ${describeValue(args.join(' '))}` : ''}`);
    try {
      switch (command as ControlCommand) {
        case 'status':
          return { ok: true, result: this.handlers.status() };
        case 'sessions':
          return { ok: true, result: this.handlers.sessions() };
        case 'volumes':
          return { ok: true, result: this.handlers.volumes() };
        case 'kick':
          if (args.length !== 1) return { ok: false, error: 'kick takes one session id' };
          return { ok: true, result: await this.handlers.kick(args[0] as string) };
        case 'reload':
          if (args.length > 1 || (args.length === 1 && args[0] !== 'force')) return { ok: false, error: 'reload takes no argument, or "force"' };
          return { ok: true, result: await this.handlers.reload(args[0] === 'force') };
        // A full copy only when asked: `--copy` after the positional arguments.
        case 'snapshot': {
          const [volume, name, ...flags] = args as string[];
          if (volume === undefined || name === undefined || !flags.every((f) => f === '--copy')) return { ok: false, error: 'snapshot takes VOLUME NAME [--copy]' };
          return { ok: true, result: await this.handlers.snapshot(volume, name, flags.length > 0) };
        }
        case 'snapshots':
          if (args.length !== 1) return { ok: false, error: 'snapshots takes one VOLUME' };
          return { ok: true, result: await this.handlers.snapshots(args[0] as string) };
        case 'delete-snapshot':
          if (args.length !== 2) return { ok: false, error: 'delete-snapshot takes VOLUME NAME' };
          return { ok: true, result: await this.handlers.deleteSnapshot(args[0] as string, args[1] as string) };
        case 'clone': {
          const [ref, target, ...flags] = args as string[];
          if (ref === undefined || target === undefined || !flags.every((f) => f === '--copy')) return { ok: false, error: 'clone takes VOLUME@SNAPSHOT NEW [--copy]' };
          return { ok: true, result: await this.handlers.clone(ref, target, flags.length > 0) };
        }
        case 'flatten':
          if (args.length !== 1) return { ok: false, error: 'flatten takes one VOLUME' };
          return { ok: true, result: await this.handlers.flatten(args[0] as string) };
      }
    } catch (e) {
      return { ok: false, error: errorText(e) };
    }
  }

  /** Stops listening, ends every control connection, unlinks the socket if it is still the one bound here. */
  async close(): Promise<void> {
    for (const s of this.connections) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    try {
      // Another rblkd may have replaced a socket file we lost; never unlink its.
      if (this.ino < 0 || statSync(this.path).ino === this.ino) unlinkSync(this.path);
    } catch {
      // Already gone.
    }
  }
}
