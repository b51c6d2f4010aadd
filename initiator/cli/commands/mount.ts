// `rblk mount URL DIR`: FUSE file → loop device → filesystem (mountVolume in
// initiator/fuse/mount-volume.ts). The FUSE file must be served for as long
// as the filesystem is mounted, so `rblk mount` starts a detached helper,
// `rblk mount --foreground`, which mounts, reports over an IPC channel, and
// serves until `rblk umount` (or SIGTERM) makes it unmount and exit. The
// helper's pid is in the attachment record that `rblk list` shows.
import { spawn } from 'node:child_process';
import { openSync, closeSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Argv } from 'yargs';
import type { MountedVolume } from '../../fuse/index.js';
import { describeError, QuietExit, UsageError } from '../cli-error.js';
import { CliLogger } from '../logger.js';
import { waitForStop } from '../signals.js';
import { formatBytes } from '../size.js';
import { stateDir, stateDirOption } from '../state-dir.js';
import { connectionArgv, connectionOptions, openSession, volumeOf, type ConnectionArgs } from '../target-args.js';
import { VERBS } from '../verbs.js';

/** What the helper tells the `rblk mount` that started it. */
type HelperMessage =
  | { type: 'ready'; id: string; pid: number; mountpoint: string; loopDevice: string; fsType: string | null; volume: string; size: number }
  | { type: 'error'; message: string; usage: boolean };

interface MountArgs extends ConnectionArgs {
  url: string;
  dir: string;
  mkfs?: 'ext4';
  yes: boolean;
  options?: string;
  type?: string;
  foreground: boolean;
  verbose: boolean;
  debug: boolean;
  'state-dir'?: string;
}

export const MOUNT_LOG = 'mount.log';

/**
 * Verbs that set up loop devices and mounts need root; say so before
 * anything is tried, rather than fail later on /run/rblk or losetup.
 */
export function requireRoot(verb: string, why: string): void {
  if (process.getuid === undefined || process.getuid() === 0) return;
  throw new Error(`rblk ${verb} needs root (${why}): run it with sudo`);
}
/** Set by `rblk mount` for the helper it starts: report over IPC instead of stdout. */
const HELPER_ENV = 'RBLK_MOUNT_HELPER';

function isHelper(): boolean {
  return process.env[HELPER_ENV] === '1' && process.send !== undefined;
}

function send(msg: HelperMessage): Promise<void> {
  return new Promise((resolveSent) => {
    if (!isHelper() || process.send === undefined || !process.connected) {
      resolveSent();
      return;
    }
    process.send(msg, undefined, {}, () => resolveSent());
  });
}

/** The helper: mounts, then serves the FUSE file until SIGINT or SIGTERM. */
async function serveMount(a: MountArgs): Promise<void> {
  const helper = isHelper();
  const log = new CliLogger(a.debug ? 'debug' : a.verbose || helper ? 'info' : 'warn', process.stderr, helper);
  // A background helper must not keep its starter's directory busy. It moves only now, once
  // its modules are loaded: a loader given relative to that directory (--import=tsx) resolves there.
  if (helper) process.chdir('/');
  let mounted: MountedVolume | null = null;
  const session = await openSession(a.url, a).catch(async (e: unknown) => {
    await send({ type: 'error', message: describeError(e), usage: e instanceof UsageError || e instanceof RangeError });
    throw e;
  });
  try {
    session.on('state', (state, previous) => log.log(state === 'closed' ? 'debug' : 'warn', `session ${previous} -> ${state}`));
    session.on('error', (e) => log.warn(`session: ${e.message}`));
    const vol = await session.open();
    try {
      // The FUSE side brings the native addon: loaded only by the process that serves the mount.
      const { mountVolume, NoFilesystemError } = await import('../../fuse/index.js');
      mounted = await mountVolume(vol, resolve(a.dir), {
        mkfs: a.mkfs,
        stateDir: stateDir(a),
        label: a.url,
        log,
        ...(a.type !== undefined ? { fsType: a.type } : {}),
        ...(a.options !== undefined ? { mountOptions: a.options.split(',').filter((o) => o !== '') } : {}),
      }).catch((e: unknown) => {
        if (e instanceof NoFilesystemError) {
          throw new Error(`cannot mount ${vol.name}: it holds no filesystem (blkid finds none): make one with --mkfs ext4 --yes (this destroys the volume's data)`, { cause: e });
        }
        throw e;
      });
      const r = mounted.record;
      const ready: HelperMessage = {
        type: 'ready',
        id: r.id,
        pid: process.pid,
        mountpoint: mounted.mountpoint,
        loopDevice: mounted.loopDevice,
        fsType: mounted.fsType,
        volume: vol.name,
        size: vol.size,
      };
      if (helper) {
        await send(ready);
        process.disconnect?.();
      } else {
        process.stdout.write(`mounted ${vol.name} (${formatBytes(vol.size)}) on ${ready.mountpoint} (${ready.fsType ?? 'unknown'} on ${ready.loopDevice})\n`);
      }
      const why = await waitForStop();
      log.info(`${why}: unmounting`, { mountpoint: mounted.mountpoint });
      // The decision to stop is made: a busy filesystem is detached lazily rather than left without its FUSE server.
      await mounted.unmount({ force: true });
      log.info('unmounted', { mountpoint: ready.mountpoint });
    } finally {
      vol.close();
    }
  } catch (e) {
    if (mounted === null) await send({ type: 'error', message: describeError(e), usage: e instanceof UsageError || e instanceof RangeError });
    throw e;
  } finally {
    await session.close();
  }
}

/** `rblk mount` without --foreground: starts the helper and waits for its report. */
async function startHelper(a: MountArgs, dir: string): Promise<void> {
  const state = stateDir(a);
  await mkdir(state, { recursive: true, mode: 0o755 });
  const logPath = join(state, MOUNT_LOG);
  const args = [...process.execArgv, process.argv[1], 'mount', a.url, dir, '--foreground', '--state-dir', state, ...connectionArgv(a)];
  if (a.mkfs !== undefined) args.push('--mkfs', a.mkfs, '--yes');
  if (a.options !== undefined) args.push('--options', a.options);
  if (a.type !== undefined) args.push('--type', a.type);
  if (a.debug) args.push('--debug');
  if (a.verbose) args.push('--verbose');
  const logFd = openSync(logPath, 'a', 0o644);
  let msg: HelperMessage | null = null;
  try {
    const child = spawn(process.execPath, args, { detached: true, env: { ...process.env, [HELPER_ENV]: '1' }, stdio: ['ignore', logFd, logFd, 'ipc'] });
    msg = await new Promise<HelperMessage | null>((resolveMsg, reject) => {
      child.once('message', (m) => resolveMsg(m as HelperMessage));
      child.once('exit', () => resolveMsg(null));
      child.once('error', reject);
    });
    if (child.connected) child.disconnect();
    child.unref();
  } finally {
    closeSync(logFd);
  }
  if (msg === null) throw new Error(`the mount helper exited before mounting (see ${logPath})`);
  if (msg.type === 'error') {
    process.stderr.write(`rblk: ${msg.message}\n`);
    throw new QuietExit(msg.usage ? 2 : 1, 'the helper reported the error');
  }
  process.stdout.write(
    `mounted ${msg.volume} (${formatBytes(msg.size)}) on ${msg.mountpoint} (${msg.fsType ?? 'unknown'} on ${msg.loopDevice}), served by pid ${msg.pid}\n`,
  );
}

export function mountCommand<T extends { debug: boolean }>(y: Argv<T>): Argv<T> {
  return y.command(
    VERBS.mount.command,
    VERBS.mount.describe,
    (b) =>
      b
        .positional('url', { type: 'string', demandOption: true, describe: 'rblk://host[:port]/VOLUME[?provider=P]' })
        .positional('dir', { type: 'string', demandOption: true, describe: 'mount point (created if missing, and then removed at umount)' })
        .options(connectionOptions)
        .options(stateDirOption)
        .option('mkfs', { choices: ['ext4'] as const, describe: 'make a new filesystem first (destroys the volume\'s data: needs --yes)' })
        .option('yes', { alias: 'y', type: 'boolean', default: false, describe: 'confirm --mkfs' })
        .option('type', { alias: 't', type: 'string', requiresArg: true, describe: 'filesystem type for mount -t (default: probe)' })
        .option('options', { alias: 'o', type: 'string', requiresArg: true, describe: 'mount options, comma-separated' })
        .option('foreground', { type: 'boolean', default: false, describe: 'mount and serve in this process until SIGINT/SIGTERM' })
        .option('verbose', { alias: 'v', type: 'boolean', default: false, describe: 'log more (to STATE_DIR/mount.log when in the background)' })
        // A check, not the handler: a dry parse (test/package/readme-commands.test.ts) sees it too.
        .check((c) => {
          if (c.mkfs !== undefined && !c.yes) throw new UsageError(`--mkfs ${c.mkfs} destroys the data on the volume: pass --yes to confirm`);
          return true;
        })
        .example('$0 mount rblk://10.0.0.5/db /mnt/db --mkfs ext4 --yes', 'format and mount')
        .example('$0 mount rblk://10.0.0.5/db /mnt/db', 'mount the filesystem already there')
        .example('$0 umount /mnt/db', 'unmount it again'),
    async (a) => {
      const args: MountArgs = { ...a, mkfs: a.mkfs };
      volumeOf(a.url);
      requireRoot('mount', 'it sets up a loop device and mounts a filesystem');
      const dir = resolve(a.dir);
      if (a.foreground) await serveMount({ ...args, dir });
      else await startHelper(args, dir);
    },
  );
}
