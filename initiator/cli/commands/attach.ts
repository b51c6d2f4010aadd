// `rblk attach URL`: serve a volume locally until SIGINT or SIGTERM, as an NBD
// export (a unix socket or a 127.0.0.1 port, optionally connected to the
// kernel's /dev/nbdN) or as one file in a FUSE mount. On the signal it
// detaches in reverse order: kernel client, NBD server or FUSE mount, session.
import { stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import type { Argv } from 'yargs';
import type { FuseAttachment } from '../../fuse/index.js';
import { NbdServer, type NbdAddress } from '../../nbd/index.js';
import { UsageError } from '../cli-error.js';
import { connectKernelNbd, disconnectKernelNbd, kernelNbdProblem } from '../kernel-nbd.js';
import { CliLogger } from '../logger.js';
import { listenNbd, nbdUri } from '../nbd-listen.js';
import { waitForStop } from '../signals.js';
import { formatBytes } from '../size.js';
import { stateDir, stateDirOption } from '../state-dir.js';
import { connectionOptions, openSession, volumeOf } from '../target-args.js';
import { VERBS } from '../verbs.js';

/** --nbd-socket PATH: its directory must exist (and be one); UsageError otherwise. */
async function requireSocketDir(path: string): Promise<void> {
  const dir = dirname(path);
  const st = await stat(dir).catch((e: unknown) => {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  });
  if (st === null) throw new UsageError(`--nbd-socket ${path}: the directory ${dir} does not exist: create it first, or put the socket in an existing directory`);
  if (!st.isDirectory()) throw new UsageError(`--nbd-socket ${path}: ${dir} is not a directory`);
}

export function attachCommand<T extends { debug: boolean }>(y: Argv<T>): Argv<T> {
  return y.command(
    VERBS.attach.command,
    VERBS.attach.describe,
    (b) =>
      b
        .positional('url', { type: 'string', demandOption: true, describe: 'rblk://host[:port]/VOLUME[?provider=P]' })
        .options(connectionOptions)
        .options(stateDirOption)
        .option('nbd-socket', { type: 'string', requiresArg: true, describe: 'serve NBD on this unix socket (default STATE_DIR/nbd-VOLUME.sock)' })
        .option('nbd-port', { type: 'number', requiresArg: true, describe: 'serve NBD on 127.0.0.1:N instead (0: any free port)' })
        .option('nbd-device', { type: 'string', requiresArg: true, describe: 'also connect the kernel client: /dev/nbdN (needs the nbd module and nbd-client)' })
        .option('fuse', { type: 'string', requiresArg: true, describe: 'instead of NBD, expose the volume as DIR/volume in a FUSE mount on DIR' })
        .option('file-name', { type: 'string', requiresArg: true, default: 'volume', describe: 'the file\'s name in the FUSE mount' })
        .option('verbose', { alias: 'v', type: 'boolean', default: false, describe: 'log connections and state changes' })
        .conflicts('fuse', ['nbd-socket', 'nbd-port', 'nbd-device'])
        .conflicts('nbd-socket', 'nbd-port')
        .example('$0 attach rblk://10.0.0.5/db --nbd-socket /tmp/db.sock', 'then: nbdinfo "nbd+unix:///?socket=/tmp/db.sock"')
        .example('$0 attach rblk://10.0.0.5/db --nbd-device /dev/nbd0', 'the volume as /dev/nbd0')
        .example('$0 attach rblk://10.0.0.5/db --fuse /mnt/db-file', 'the volume as /mnt/db-file/volume'),
    async (a) => {
      const name = volumeOf(a.url);
      if (a['nbd-port'] !== undefined && (!Number.isInteger(a['nbd-port']) || a['nbd-port'] < 0 || a['nbd-port'] > 65535)) {
        throw new UsageError(`--nbd-port ${a['nbd-port']} is not a port number`);
      }
      if (a['nbd-device'] !== undefined) {
        const problem = kernelNbdProblem(a['nbd-device']);
        if (problem !== undefined) throw new Error(problem);
      }
      // A socket path of the user's goes in a directory that is there: a mistyped one is refused,
      // not created and left behind (only the state directory, ours, is created; docs/cli.md "attach URL").
      if (a['nbd-socket'] !== undefined) await requireSocketDir(resolve(a['nbd-socket']));
      const log = new CliLogger(a.debug ? 'debug' : a.verbose ? 'info' : 'warn');
      const dir = stateDir(a);
      const session = await openSession(a.url, a);
      // Teardown in reverse: whatever got set up is undone, also after a failure half-way.
      const undo: Array<() => Promise<void>> = [() => session.close()];
      let failed = true;
      try {
        // With --debug, openSession's trace logs state changes already.
        if (a.debug !== true) session.on('state', (state, previous) => log.log(state === 'closed' ? 'debug' : 'warn', `session ${previous} -> ${state}`));
        session.on('error', (e) => log.warn(`session: ${e.message}`));
        const vol = await session.open();
        undo.push(async () => vol.close());
        const what = `${vol.name} (${formatBytes(vol.size)}${vol.readOnly ? ', read-only' : ''})`;
        let ended: Promise<string> | undefined;
        if (a.fuse !== undefined) {
          let onEnd: (why: string) => void = () => undefined;
          ended = new Promise((r) => (onEnd = r));
          const { attachFuse } = await import('../../fuse/index.js');
          const att: FuseAttachment = await attachFuse(vol, resolve(a.fuse), {
            fileName: a['file-name'],
            label: a.url,
            stateDir: dir,
            log,
            onEnd: () => onEnd('the FUSE mount was unmounted from outside'),
          });
          undo.push(() => att.close());
          process.stdout.write(`attached ${what} as ${att.path}\n`);
        } else {
          const server = new NbdServer(vol, { name: vol.name, log: log.nbd });
          const where = a['nbd-port'] !== undefined ? { port: a['nbd-port'] } : { path: resolve(a['nbd-socket'] ?? `${dir}/nbd-${name}.sock`) };
          const address: NbdAddress = await listenNbd(server, where);
          undo.push(() => server.close());
          process.stdout.write(`serving ${what} at ${nbdUri(address, vol.name)}\n`);
          const device = a['nbd-device'];
          if (device !== undefined) {
            await connectKernelNbd(device, address, vol.name, vol.blockSize);
            undo.push(() => disconnectKernelNbd(device));
            process.stdout.write(`attached ${what} as ${device}\n`);
          }
        }
        log.info('running until SIGINT or SIGTERM');
        const why = await waitForStop(ended);
        log.info(`${why}: detaching`);
        failed = false;
      } finally {
        const errors: string[] = [];
        for (const step of undo.reverse()) {
          try {
            await step();
          } catch (e) {
            errors.push(e instanceof Error ? e.message : String(e));
          }
        }
        // A failed setup reports its own error; a failed teardown after a clean run is the error.
        if (!failed && errors.length > 0) throw new Error(`detach incomplete: ${errors.join('; ')}`);
      }
      process.stdout.write(`detached ${name}\n`);
    },
  );
}
