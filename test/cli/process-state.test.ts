// isRunning, which `rblk umount` waits on: a process whose main thread has
// exited (its /proc/PID/stat says Z) while another thread still runs holds
// every resource it had (fds, a /dev/fuse session, the loop device's backing
// file), so it is still running. Made with a real process: python3 ends its
// main thread with pthread_exit while a second thread sleeps.
import test from 'ava';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { isRunning } from '../../initiator/process-state.js';
import { isOwnerAlive, type AttachmentRecord } from '../../initiator/fuse/index.js';
import { until } from '../../bench/kit/wait.js';

const PYTHON = ['/usr/bin/python3', '/bin/python3'].find((p) => existsSync(p));

function leaderState(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
}

(PYTHON === undefined ? test.skip : test)('a process whose main thread exited while another thread runs is still running', async (t) => {
  const script = 'import ctypes, threading, time\nthreading.Thread(target=time.sleep, args=(60,)).start()\nctypes.CDLL(None).pthread_exit(None)\n';
  const child = spawn(PYTHON!, ['-c', script], { stdio: 'ignore' });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  t.teardown(async () => {
    child.kill('SIGKILL');
    await exited;
  });
  const pid = child.pid!;
  await until(() => leaderState(pid) === 'Z', 'the main thread to exit');
  t.true(isRunning(pid), 'its second thread still runs');
  child.kill('SIGKILL');
  await exited;
  t.false(isRunning(pid));
});

(PYTHON === undefined ? test.skip : test)('an exited process nobody reaped (a zombie) is gone, for umount and for the stale-record cleanup alike', async (t) => {
  // python3 forks a child that exits at once and never waits for it.
  const script = 'import os, sys, time\npid = os.fork()\nif pid == 0:\n    os._exit(0)\nprint(pid, flush=True)\ntime.sleep(60)\n';
  const parent = spawn(PYTHON!, ['-c', script], { stdio: ['ignore', 'pipe', 'ignore'] });
  const exited = new Promise<void>((r) => parent.once('exit', () => r()));
  t.teardown(async () => {
    parent.kill('SIGKILL');
    await exited;
  });
  const pid = await new Promise<number>((resolve) => parent.stdout!.once('data', (b: Buffer) => resolve(Number(b.toString().trim()))));
  await until(() => leaderState(pid) === 'Z', 'the child to exit');
  t.false(isRunning(pid));
  const rec: AttachmentRecord = {
    id: `${pid}-00000000`,
    kind: 'mount',
    pid,
    createdAt: '',
    label: null,
    fuseDir: '/nonexistent',
    file: '/nonexistent/volume',
    size: 0,
    blockSize: 512,
    readOnly: false,
    loopDevice: null,
    mountpoint: null,
    fsType: null,
    createdMountpoint: false,
  };
  t.false(isOwnerAlive(rec), 'cleanupStaleAttachment may undo what a zombie left');
});

test('the current process runs; a pid that does not exist does not', (t) => {
  t.true(isRunning(process.pid));
  t.false(isRunning(0x7ffffff0));
});
