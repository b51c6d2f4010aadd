// rblkd's control socket (docs/operations.md "The control socket"): a Unix
// stream socket, mode 0660 with group rblk when that group exists (0600
// otherwise), speaking newline-delimited JSON: one request object per line,
// `{"command":"sessions"}` or `{"command":"kick","args":["3"]}`, one answer
// line each, `{"ok":true,"result":...}` or `{"ok":false,"error":"..."}`.
// A socket file left by an rblkd that died is removed at start; one that
// another rblkd still answers on is not taken. At exit it is closed and
// unlinked, if it is still ours.
import { chmodSync, chownSync, lstatSync, mkdirSync, readFileSync, statSync, unlinkSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { dirname } from 'node:path';
import type { DaemonLogger } from './logger.js';
import { errorMessage } from './logger.js';

export const CONTROL_COMMANDS = ['status', 'sessions', 'volumes', 'kick', 'reload'] as const;
export type ControlCommand = (typeof CONTROL_COMMANDS)[number];

export interface ControlHandlers {
  status(): unknown;
  sessions(): unknown;
  volumes(): unknown;
  kick(session: string): Promise<unknown>;
  reload(): Promise<unknown>;
}

export interface ControlRequest {
  command: ControlCommand;
  args?: string[];
}

/** A request line longer than this ends the connection: requests are a few dozen bytes. */
const MAX_REQUEST = 64 * 1024;
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
    const server = createServer();
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
    s.setEncoding('utf8');
    let pending = '';
    // One request at a time per connection, answered in order.
    let chain: Promise<void> = Promise.resolve();
    s.on('data', (chunk: string) => {
      pending += chunk;
      if (pending.length > MAX_REQUEST && !pending.includes('\n')) {
        s.end(`${JSON.stringify({ ok: false, error: `request longer than ${MAX_REQUEST} bytes` })}\n`);
        return;
      }
      let nl: number;
      while ((nl = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, nl).trim();
        pending = pending.slice(nl + 1);
        if (line === '') continue;
        chain = chain.then(async () => {
          const answer = await this.answer(line);
          if (!s.destroyed) s.write(`${JSON.stringify(answer)}\n`);
        });
      }
    });
  }

  /** One request line to its answer; never rejects. */
  private async answer(line: string): Promise<{ ok: true; result: unknown } | { ok: false; error: string }> {
    let req: unknown;
    try {
      req = JSON.parse(line);
    } catch {
      return { ok: false, error: 'the request is not JSON' };
    }
    const command = (req as { command?: unknown } | null)?.command;
    const args = (req as { args?: unknown }).args ?? [];
    if (typeof command !== 'string' || !(CONTROL_COMMANDS as readonly string[]).includes(command)) {
      return { ok: false, error: `unknown command ${JSON.stringify(command)}; one of ${CONTROL_COMMANDS.join(', ')}` };
    }
    if (!Array.isArray(args) || !args.every((a) => typeof a === 'string')) return { ok: false, error: 'args must be a list of strings' };
    this.log.debug(`control: ${command}${args.length > 0 ? ` ${args.join(' ')}` : ''}`);
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
          return { ok: true, result: await this.handlers.reload() };
      }
    } catch (e) {
      return { ok: false, error: errorMessage(e) };
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
