// The typed, promise-based face of the native FUSE session: a directory with
// one regular file whose reads, writes, fsyncs and fallocates are answered by
// a FuseFileHandler. It knows nothing of volumes or SCSI. It is the only
// module that touches fuseAddon().FuseSession.
//
// Every request is answered exactly once: with the handler's result, with the
// errno of a FuseError it rejects with, or with EIO for any other rejection.
import { execFile } from 'node:child_process';
import { constants as fsConstants } from 'node:fs';
import { readFile, realpath } from 'node:fs/promises';
import { constants as osConstants } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { addon, fuseAddon, type NativeFuseOp, type NativeFuseSession } from './binding.js';

const run = promisify(execFile);
const ERRNO = osConstants.errno;

export type ErrnoName = keyof typeof osConstants.errno;

/** Rejecting with this answers the FUSE request with that errno. */
export class FuseError extends Error {
  readonly code: ErrnoName;
  readonly errno: number;

  constructor(code: ErrnoName, message?: string) {
    super(message ?? code);
    this.name = 'FuseError';
    this.code = code;
    this.errno = ERRNO[code];
  }
}

export type FallocateKind = 'allocate' | 'punchHole' | 'zeroRange';

export interface FallocateRequest {
  kind: FallocateKind;
  offset: number;
  length: number;
  /** FALLOC_FL_KEEP_SIZE: the range may run past the end without growing the file. */
  keepSize: boolean;
}

/** Serves the file's data. Offsets and lengths are whatever the caller asked: not aligned. */
export interface FuseFileHandler {
  /** Up to length bytes at offset; fewer only at the end of the file. */
  read(offset: number, length: number): Promise<Buffer>;
  /** Resolves the number of bytes written. sync: O_DSYNC/O_SYNC, durable before it resolves. */
  write(offset: number, data: Buffer, opts: { sync: boolean }): Promise<number>;
  fsync(opts: { datasync: boolean }): Promise<void>;
  fallocate(req: FallocateRequest): Promise<void>;
}

export interface FuseMountOptions {
  fileName: string;
  size: number;
  blockSize: number;
  readOnly: boolean;
  /** Source column in /proc/mounts (default "rblk"). */
  fsName?: string;
  /** Let users other than the mounting one in (needs user_allow_other for non-root). */
  allowOther?: boolean;
  /** Entry and attribute cache validity in seconds (default 60; the size never changes). */
  timeout?: number;
  /** A handler rejected with something that is not a FuseError (answered EIO). */
  onError?: (err: unknown, op: FuseOp) => void;
  /** The kernel ended the session (unmounted from outside, or the connection aborted). */
  onEnd?: (errno: number) => void;
}

export type FuseOp = Exclude<NativeFuseOp, 'end'>;

const live = new Set<FuseMount>();
let exitHookInstalled = false;

// An exit handler cannot wait for anything, so mounts are detached without
// draining; the native env cleanup hook does the same where exit handlers do
// not run (worker teardown).
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const m of live) m.destroy();
  });
}

export class FuseMount {
  /** The mount point (resolved). */
  readonly dir: string;
  /** The one file: dir/fileName. */
  readonly path: string;
  private readonly native: NativeFuseSession;
  private readonly handler: FuseFileHandler;
  private readonly opts: FuseMountOptions;
  private readonly inflight = new Set<Promise<void>>();
  private closing: Promise<void> | undefined;
  private ended = false;

  private constructor(dir: string, opts: FuseMountOptions, handler: FuseFileHandler) {
    this.dir = dir;
    this.path = join(dir, opts.fileName);
    this.opts = opts;
    this.handler = handler;
    this.native = new (fuseAddon().FuseSession)(
      dir,
      {
        fileName: opts.fileName,
        size: opts.size,
        blockSize: opts.blockSize,
        readOnly: opts.readOnly,
        fsName: opts.fsName ?? 'rblk',
        allowOther: opts.allowOther ?? false,
        timeout: opts.timeout ?? 60,
      },
      (op, id, offset, length, data, flags) => this.onRequest(op, id, offset, length, data, flags),
    );
  }

  /** Mounts at dir (an existing directory). Rejects with the addon's error (.code, .errno, .op). */
  static async mount(dir: string, opts: FuseMountOptions, handler: FuseFileHandler): Promise<FuseMount> {
    const resolved = await realpath(dir);
    const m = new FuseMount(resolved, opts, handler);
    live.add(m);
    installExitHook();
    return m;
  }

  /** False once closed or ended by the kernel. */
  get active(): boolean {
    return !this.ended && this.closing === undefined;
  }

  /** Requests being served now. */
  get pending(): number {
    return this.inflight.size;
  }

  /**
   * Waits for the requests being served, then unmounts. If the mount is still
   * listed afterwards (a non-root mount, or a connection that was aborted),
   * falls back to `fusermount3 -u -z`. Idempotent.
   */
  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  /** Unmounts now, without waiting: requests still being served fail with EIO. */
  destroy(): void {
    this.closing ??= Promise.resolve();
    this.native.close();
    live.delete(this);
  }

  private async shutdown(): Promise<void> {
    while (this.inflight.size > 0) await Promise.allSettled([...this.inflight]);
    this.native.close();
    live.delete(this);
    await ensureUnmounted(this.dir);
  }

  private onRequest(op: NativeFuseOp, id: number, offset: number, length: number, data: Buffer | null, flags: number): void {
    if (op === 'end') {
      this.ended = true;
      live.delete(this);
      this.opts.onEnd?.(flags);
      return;
    }
    const served = this.serve(op, offset, length, data, flags).then(
      (result) => {
        this.native.reply(id, 0, result);
      },
      (err: unknown) => {
        if (!(err instanceof FuseError)) this.opts.onError?.(err, op);
        this.native.reply(id, err instanceof FuseError ? err.errno : ERRNO.EIO, null);
      },
    )
      // A reply that cannot be made (the file system is being unmounted) is reported, not left unhandled.
      .catch((err: unknown) => this.opts.onError?.(err, op));
    this.inflight.add(served);
    void served.finally(() => this.inflight.delete(served));
  }

  private async serve(op: FuseOp, offset: number, length: number, data: Buffer | null, flags: number): Promise<Buffer | number | null> {
    switch (op) {
      case 'read':
        return this.handler.read(offset, length);
      case 'write':
        if (data === null) throw new FuseError('EINVAL');
        // O_SYNC is __O_SYNC | O_DSYNC, so one bit covers both.
        return this.handler.write(offset, data, { sync: (flags & fsConstants.O_DSYNC) !== 0 });
      case 'fsync':
        await this.handler.fsync({ datasync: flags !== 0 });
        return null;
      case 'fallocate':
        await this.handler.fallocate(decodeFallocate(flags, offset, length));
        return null;
    }
  }
}

function decodeFallocate(mode: number, offset: number, length: number): FallocateRequest {
  const M = addon().fallocateModes;
  const keepSize = (mode & M.KEEP_SIZE) !== 0;
  const rest = mode & ~M.KEEP_SIZE;
  // Collapse, insert, unshare and anything newer change a layout a volume does not have.
  if (rest === 0) return { kind: 'allocate', offset, length, keepSize };
  if (rest === M.PUNCH_HOLE) return { kind: 'punchHole', offset, length, keepSize };
  if (rest === M.ZERO_RANGE) return { kind: 'zeroRange', offset, length, keepSize };
  throw new FuseError('EOPNOTSUPP', `fallocate mode 0x${mode.toString(16)}`);
}

export interface MountEntry {
  source: string;
  mountpoint: string;
  fsType: string;
}

// /proc/self/mountinfo escapes space, tab, newline and backslash as \ooo.
function unescapeMountField(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_m, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

/** The mounts this process sees (/proc/self/mountinfo, proc(5)). */
export async function listMounts(): Promise<MountEntry[]> {
  const text = await readFile('/proc/self/mountinfo', 'utf8');
  const out: MountEntry[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const [left, right] = line.split(' - ');
    const l = left.split(' ');
    const r = (right ?? '').split(' ');
    out.push({ mountpoint: unescapeMountField(l[4] ?? ''), fsType: r[0] ?? '', source: unescapeMountField(r[1] ?? '') });
  }
  return out;
}

export async function isMountPoint(dir: string): Promise<boolean> {
  return (await listMounts()).some((m) => m.mountpoint === dir);
}

/** Unmounts a FUSE mount at dir (lazily) if one is still there: fusermount3, then umount. */
export async function ensureUnmounted(dir: string): Promise<void> {
  const fuseAt = async () => (await listMounts()).some((m) => m.mountpoint === dir && m.fsType.startsWith('fuse'));
  if (!(await fuseAt())) return;
  const failures: string[] = [];
  for (const [cmd, args] of [
    ['fusermount3', ['-u', '-z', dir]],
    ['umount', ['-l', dir]],
  ] as const) {
    try {
      await run(cmd, [...args]);
    } catch (err) {
      failures.push(`${cmd}: ${((err as { stderr?: string }).stderr ?? String(err)).trim()}`);
    }
    if (!(await fuseAt())) return;
  }
  throw new Error(`could not unmount FUSE at ${dir}: ${failures.join('; ')}`);
}
