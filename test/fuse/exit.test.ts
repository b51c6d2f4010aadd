// A process that exits without close() (process.exit, an uncaught
// exception) leaves no FUSE mount behind.
import test from 'ava';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { listMounts } from '../../native/fuse.js';
import { tempDir } from './helpers/fuse-fixture.js';

const child = fileURLToPath(new URL('./helpers/exit-child.ts', import.meta.url));

for (const how of ['exit', 'throw'] as const) {
  test(`the mount goes away when the serving process ends by ${how}`, async (t) => {
    const dir = await tempDir(t, 'exit');
    const proc = spawn(process.execPath, ['--import=tsx', child, dir, how], { stdio: ['pipe', 'pipe', 'pipe'] });
    t.teardown(() => {
      if (proc.exitCode === null) proc.kill('SIGKILL');
    });
    let out = '';
    proc.stdout.setEncoding('utf8');
    proc.stdout.on('data', (d: string) => (out += d));
    while (!out.includes('\n')) await once(proc.stdout, 'data');
    t.regex(out, /^ready /);
    t.true((await listMounts()).some((m) => m.mountpoint === dir && m.fsType === 'fuse.rblk'), 'mounted while it runs');
    const exited = once(proc, 'exit');
    proc.stdin.write('go\n');
    const [code] = (await exited) as [number | null];
    t.is(code, how === 'exit' ? 3 : 1);
    t.false((await listMounts()).some((m) => m.mountpoint === dir), 'no mount left');
  });
}
