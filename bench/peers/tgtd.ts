// Starting and stopping tgtd (the Linux SCSI target framework's user-space
// daemon) with one iSCSI target and one file-backed LUN: shared by the tgt
// row of the peers bench and the compliance run (bench/compliance.ts). tgtd
// runs in the foreground as our child with its own control port, so it never
// touches a system tgtd. Teardown goes through tgtadm, because tgtd ignores
// SIGTERM while a target exists; it is killed if that fails.
import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { promisify } from 'node:util';
import { startDaemon, freePort, waitForPort, type Daemon } from './children.js';

const execFileP = promisify(execFile);

export interface TgtdOptions {
  /** The backing file of LUN 1. */
  readonly file: string;
  readonly iqn: string;
  /** Open the file with O_DIRECT (bs_rdwr --bsoflags direct). */
  readonly direct: boolean;
  /** LOGICAL BLOCKS PER PHYSICAL BLOCK EXPONENT (tgtadm --params lbppbe=N); tgt's own (3 at 512-byte blocks) when absent. */
  readonly lbppbe?: number;
}

export interface Tgtd {
  readonly d: Daemon;
  readonly port: number;
  readonly control: number;
  readonly iqn: string;
  /** iscsi://127.0.0.1:PORT/IQN/1 */
  readonly url: string;
}

/** The LUN tgtd serves the file as (LUN 0 is its controller). */
export const TGT_LUN = 1;

async function tgtadm(controlPort: number, args: string[]): Promise<void> {
  try {
    await execFileP('tgtadm', ['-C', String(controlPort), ...args], { timeout: 10_000 });
  } catch (e) {
    const err = e as Error & { stderr?: string };
    throw new Error(`tgtadm ${args.join(' ')}: ${err.stderr?.trim() || err.message}`);
  }
}

/** tgtd leaves its management socket and lock file behind, even after a clean shutdown. */
function removeSocket(control: number): void {
  for (const f of [`socket.${control}`, `socket.${control}.lock`]) rmSync(`/var/run/tgtd/${f}`, { force: true });
}

let started = 0;

export async function startTgtd(o: TgtdOptions): Promise<Tgtd> {
  const port = await freePort();
  // tgtd names its management socket after the control port (/var/run/tgtd/socket.N, N at most 32767);
  // it is not a TCP port, so any number no other tgtd uses will do (one per tgtd this process starts).
  const control = 1024 + ((process.pid + started++) % 30000);
  const d = startDaemon('tgtd', ['-f', '-C', String(control), '--iscsi', `portal=127.0.0.1:${port}`], { stdio: ['ignore', 'pipe', 'pipe'] });
  // If the run dies, children.ts kills tgtd; its socket goes too.
  process.once('exit', () => removeSocket(control));
  try {
    await waitForPort(port, d);
    await tgtadm(control, ['--lld', 'iscsi', '--op', 'new', '--mode', 'target', '--tid', '1', '-T', o.iqn]);
    const lun = ['--lld', 'iscsi', '--op', 'new', '--mode', 'logicalunit', '--tid', '1', '--lun', String(TGT_LUN), '-b', o.file];
    await tgtadm(control, o.direct ? [...lun, '--bsoflags', 'direct'] : lun);
    if (o.lbppbe !== undefined)
      await tgtadm(control, ['--lld', 'iscsi', '--op', 'update', '--mode', 'logicalunit', '--tid', '1', '--lun', String(TGT_LUN), '--params', `lbppbe=${o.lbppbe}`]);
    await tgtadm(control, ['--lld', 'iscsi', '--op', 'bind', '--mode', 'target', '--tid', '1', '-I', 'ALL']);
  } catch (e) {
    await stopTgtd({ d, control });
    throw e;
  }
  return { d, port, control, iqn: o.iqn, url: `iscsi://127.0.0.1:${port}/${o.iqn}/${TGT_LUN}` };
}

export async function stopTgtd(t: { d: Daemon; control: number }): Promise<void> {
  // `delete --mode system` makes tgtd exit, but only once no target is left:
  // delete the target (--force: sessions may remain), take the system offline, then delete it.
  try {
    await tgtadm(t.control, ['--lld', 'iscsi', '--op', 'delete', '--mode', 'target', '--tid', '1', '--force']);
    await tgtadm(t.control, ['--op', 'update', '--mode', 'sys', '--name', 'State', '-v', 'offline']);
    await tgtadm(t.control, ['--op', 'delete', '--mode', 'system']);
  } catch {
    // Killed below either way.
  }
  const timer = setTimeout(() => t.d.child.kill('SIGKILL'), 3000);
  await t.d.exited;
  clearTimeout(timer);
  removeSocket(t.control);
}
