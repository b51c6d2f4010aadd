// A child process inherits none of the addon's descriptors (native/src/core/child-fds.h):
// libfabric opens its sockets and epoll sets without O_CLOEXEC, and a child that kept one
// (fio, a mount helper) would keep the connection alive after this process closed it.
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { connectPair, PROVIDERS } from '../helpers/fabric-pair.js';

/** The descriptors a shell spawned now holds (its own, not those of ls). */
function childFds(stdio: ('ignore' | 'pipe')[] = ['ignore', 'pipe', 'pipe']): number[] {
  const r = spawnSync('sh', ['-c', 'ls /proc/$$/fd'], { stdio, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`sh failed: ${r.stderr}`);
  return r.stdout.split(/\s+/).filter(Boolean).map(Number).sort((a, b) => a - b);
}

for (const provider of PROVIDERS) {
  test.serial(`${provider}: a child spawned while a connection is open holds only its stdio`, async (t) => {
    const pair = await connectPair(provider);
    t.teardown(() => pair.close());
    const mine = readdirSync('/proc/self/fd').length;
    t.true(mine > 10, `this process holds the connection's descriptors (${mine})`);
    t.deepEqual(childFds(), [0, 1, 2]);
    // What the child asks for is still handed to it: an extra pipe at fd 3.
    t.deepEqual(childFds(['ignore', 'pipe', 'pipe', 'pipe']), [0, 1, 2, 3]);
  });
}
