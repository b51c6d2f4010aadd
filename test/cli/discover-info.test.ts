// discover and info against a target in another process over tcp, unknown
// volumes, and logging in with a secret from a file or RBLK_SECRET.
import test from 'ava';
import { rblk, secretFile, tempDir } from './helpers/cli.js';
import { startTargetProcess, stopAllTargets, type TargetProcess } from './helpers/target-process.js';

const MiB = 1 << 20;
const INITIATOR = 'iqn.2026-11.io.rblk:cli-test';
const SECRET = 'a-secret-of-more-than-16-bytes';

let open: Promise<TargetProcess> | undefined;
let secured: Promise<TargetProcess> | undefined;
const target = (): Promise<TargetProcess> =>
  (open ??= startTargetProcess(null, {
    provider: 'tcp',
    volumes: [
      { name: 'vol0', lun: 0, size: 16 * MiB },
      { name: 'ro', lun: 1, size: 1 * MiB, readOnly: true },
      { name: 'big4k', lun: 2, size: 8 * MiB, blockSize: 4096 },
    ],
  }));
const authTarget = (): Promise<TargetProcess> =>
  (secured ??= startTargetProcess(null, {
    provider: 'tcp',
    volumes: [{ name: 'vault', lun: 0, size: 1 * MiB }],
    secrets: { [INITIATOR]: SECRET },
    authRequired: true,
  }));
test.after.always(stopAllTargets);

test('discover lists every volume with size, block size and access', async (t) => {
  const tp = await target();
  const r = await rblk(['discover', tp.hostPort, '--provider', 'tcp']);
  t.is(r.code, 0, r.stderr);
  const lines = r.out.trimEnd().split('\n');
  t.regex(lines[0], /^LUN\s+NAME\s+SIZE\s+BLOCK\s+ACCESS\s+URL$/);
  t.deepEqual(
    lines.slice(1).map((l) => l.split(/\s{2,}/)),
    [
      ['0', 'vol0', '16 MiB', '512', 'rw', tp.url('vol0')],
      ['1', 'ro', '1 MiB', '512', 'ro', tp.url('ro')],
      ['2', 'big4k', '8 MiB', '4096', 'rw', tp.url('big4k')],
    ],
  );
});

test('discover --json: the volumes with exact sizes and URLs', async (t) => {
  const tp = await target();
  const r = await rblk(['discover', `rblk://127.0.0.1:${tp.port}?provider=tcp`, '--json']);
  t.is(r.code, 0, r.stderr);
  const doc = JSON.parse(r.out) as { target: string; volumes: Array<Record<string, unknown>> };
  t.is(doc.target, tp.hostPort);
  t.deepEqual(
    doc.volumes.map((v) => [v.name, v.size, v.blockSize, v.readOnly, v.url]),
    [
      ['vol0', 16 * MiB, 512, false, tp.url('vol0')],
      ['ro', 1 * MiB, 512, true, tp.url('ro')],
      ['big4k', 8 * MiB, 4096, false, tp.url('big4k')],
    ],
  );
  t.regex(String(doc.volumes[0].id), /^naa\.[0-9a-f]{32}$/);
});

test('discover --target-name and --initiator-name: the URLs it prints carry both, and reach the volume', async (t) => {
  const tp = await startTargetProcess(t, { provider: 'tcp', targetName: 'iqn.2026-12.io.rblk:named', volumes: [{ name: 'v', lun: 0, size: 1 * MiB }] });
  const r = await rblk(['discover', tp.hostPort, '--provider', 'tcp', '--target-name', 'iqn.2026-12.io.rblk:named', '--initiator-name', INITIATOR, '--json']);
  t.is(r.code, 0, r.stderr);
  const url = String((JSON.parse(r.out) as { volumes: Array<Record<string, unknown>> }).volumes[0]!.url);
  t.is(url, `rblk://${tp.hostPort}/v?provider=tcp&initiator=${INITIATOR}&target=iqn.2026-12.io.rblk:named`);
  // Without target= it would ask for the default target name, and be refused.
  const info = await rblk(['info', url]);
  t.is(info.code, 0, info.stderr);
  t.regex(info.out, /^volume:\s+v$/m);
});

test('info shows size, blocks, block size, read-only, serial, id, max transfer and provider', async (t) => {
  const tp = await target();
  const r = await rblk(['info', tp.url('big4k')]);
  t.is(r.code, 0, r.stderr);
  const f = Object.fromEntries(r.out.trimEnd().split('\n').map((l) => l.split(/:\s+/, 2) as [string, string]));
  t.is(f.volume, 'big4k');
  t.is(f.size, '8 MiB (8388608 bytes)');
  t.is(f.blocks, '2048');
  t.is(f['block size'], '4096');
  t.is(f['read-only'], 'no');
  t.regex(f.serial, /^[0-9a-f]{32}$/);
  t.regex(f.id, /^naa\.[0-9a-f]{32}$/);
  t.is(f['max transfer'], '1 MiB (1048576 bytes)');
  t.is(f.provider, 'tcp');
});

test('--debug traces the session on stderr: the login, unit attentions absorbed, the logout; stdout is unchanged', async (t) => {
  const tp = await target();
  const plain = await rblk(['info', tp.url('vol0')]);
  const r = await rblk(['info', tp.url('vol0'), '--debug']);
  t.is(r.code, 0, r.stderr);
  // The serial and id are the volume's; the output is the same with and without --debug.
  t.is(r.out, plain.out);
  const lines = r.stderr.trimEnd().split('\n');
  t.is(lines[0], `rblk: debug: logged in at ${tp.hostPort}: 1 of 1 connection(s) up, provider tcp, max transfer 1048576 bytes`);
  // A new I_T nexus starts with the power-on unit attention (SAM-5 5.14), which the library absorbs.
  t.true(lines.includes('rblk: debug: unit attention on LUN 0: UNIT ATTENTION 29/00 POWER ON, RESET, OR BUS DEVICE RESET OCCURRED (absorbed)'), r.stderr);
  t.is(lines[lines.length - 1], 'rblk: debug: session connected -> closed');
  t.is(plain.stderr, '');
});

test('info --json of a read-only volume', async (t) => {
  const tp = await target();
  const r = await rblk(['info', `rblk://127.0.0.1:${tp.port}/ro`, '--provider', 'tcp', '--json']);
  t.is(r.code, 0, r.stderr);
  const v = JSON.parse(r.out) as Record<string, unknown>;
  t.like(v, { name: 'ro', lun: 1, size: MiB, blocks: 2048, blockSize: 512, readOnly: true, maxTransfer: MiB, provider: 'tcp' });
});

test('an unknown volume: exit 1 naming the volumes there are', async (t) => {
  const tp = await target();
  const r = await rblk(['info', tp.url('nope')]);
  t.is(r.code, 1);
  t.is(r.stderr, `rblk: no volume named "nope" at 127.0.0.1:${tp.port} (visible: vol0, ro, big4k) [INVALID]\n`);
  t.is(r.out, '');
});

test('a secret file logs in; RBLK_SECRET does too', async (t) => {
  const tp = await authTarget();
  const dir = await tempDir(t);
  const file = await secretFile(dir, SECRET);
  const viaFile = await rblk(['info', tp.url('vault'), '--initiator-name', INITIATOR, '--secret-file', file, '--json']);
  t.is(viaFile.code, 0, viaFile.stderr);
  t.is((JSON.parse(viaFile.out) as { name: string }).name, 'vault');
  const viaEnv = await rblk(['discover', tp.hostPort, '--provider', 'tcp', '--initiator-name', INITIATOR], { env: { RBLK_SECRET: SECRET } });
  t.is(viaEnv.code, 0, viaEnv.stderr);
  t.regex(viaEnv.out, /\bvault\b/);
});

test('a wrong secret, or none, is refused: exit 1, AUTH_FAILED', async (t) => {
  const tp = await authTarget();
  const dir = await tempDir(t);
  const wrong = await rblk(['info', tp.url('vault'), '--initiator-name', INITIATOR, '--secret-file', await secretFile(dir, 'not-the-right-secret-at-all')]);
  t.is(wrong.code, 1);
  t.regex(wrong.stderr, /^rblk: .*\[AUTH_FAILED\]\n$/);
  const none = await rblk(['info', tp.url('vault'), '--initiator-name', INITIATOR]);
  t.is(none.code, 1);
  t.regex(none.stderr, /^rblk: .*\[AUTH_FAILED\]\n$/);
});

test('a secret file others can read is refused before connecting', async (t) => {
  const tp = await authTarget();
  const dir = await tempDir(t);
  const loose = await secretFile(dir, SECRET, 0o644);
  const r = await rblk(['info', tp.url('vault'), '--initiator-name', INITIATOR, '--secret-file', loose]);
  t.is(r.code, 1);
  t.is(r.stderr, `rblk: secret file ${loose} has mode 0644; it must be 0600 or stricter (chmod 600 ${loose}) [INVALID]\n`);
});
