// bench/parent-death.ts: a child started through diesWithParent is killed by
// the kernel when the process that started it dies without cleaning up (as
// an ava worker ended by its timeout does), and keeps its own pid.
import test from 'ava';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { canDieWithParent } from '../../bench/parent-death.js';

const HELPER = fileURLToPath(new URL('../../bench/parent-death.ts', import.meta.url));

function alive(pid: number): boolean {
  try {
    // A zombie (reaped later by init) counts as gone.
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

(canDieWithParent ? test : test.skip)('a child started through diesWithParent dies with its parent (SIGKILL), and has its own pid', async (t) => {
  // The parent: a node process that starts `sleep 300` through the helper, prints its pid, and waits.
  const script = `import { spawn } from 'node:child_process';
import { diesWithParent } from ${JSON.stringify(HELPER)};
const [cmd, ...args] = diesWithParent(['sleep', '300']);
const c = spawn(cmd, args, { stdio: 'ignore' });
c.on('spawn', () => console.log(c.pid));
setInterval(() => undefined, 1000);`;
  const parent = spawn(process.execPath, ['--import=tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => parent.kill('SIGKILL'));
  const pid = await new Promise<number>((resolve, reject) => {
    let out = '';
    parent.stdout.setEncoding('utf8').on('data', (s: string) => {
      out += s;
      const m = /^(\d+)\n/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    parent.once('exit', () => reject(new Error(`the parent exited first: ${out}`)));
  });
  // setpriv execs in place: the pid is sleep's, once it has exec'd.
  let comm = '';
  for (let i = 0; i < 200 && comm !== 'sleep'; i++) {
    comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
    if (comm !== 'sleep') await new Promise((r) => setTimeout(r, 10));
  }
  t.is(comm, 'sleep');
  parent.kill('SIGKILL');
  await new Promise((r) => parent.once('exit', r));
  // The kernel sends the death signal as the parent exits; bounded wait for it to land.
  for (let i = 0; i < 500 && alive(pid); i++) await new Promise((r) => setTimeout(r, 10));
  t.false(alive(pid), 'the child went with its parent');
});
