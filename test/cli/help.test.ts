// --help on every command: usage on stdout, exit 0, nothing on stderr.
import test from 'ava';
import { rblk } from './helpers/cli.js';

const COMMANDS = ['discover', 'info', 'read', 'write', 'bench', 'verify', 'attach', 'mount', 'umount', 'list'];

test('--help lists every command and exits 0', async (t) => {
  const r = await rblk(['--help']);
  t.is(r.code, 0);
  for (const c of COMMANDS) t.regex(r.out, new RegExp(`rblk ${c}\\b`));
  t.regex(r.out, /aliases: detach/);
});

for (const c of COMMANDS) {
  test(`${c} --help shows its usage and exits 0`, async (t) => {
    const r = await rblk([c, '--help']);
    t.is(r.code, 0, r.stderr);
    t.regex(r.out, new RegExp(`^rblk ${c}\\b`));
    t.is(r.stderr, '');
  });
}
