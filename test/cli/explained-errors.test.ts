// The CLI says what happened (docs/cli.md "Errors"): a mistyped verb or option
// gets the nearest name, a name that does not resolve says so, a refused
// connection and a port in use name the host, port or program, and root-only
// verbs say they need root. Each runs the real CLI as a child process.
import test from 'ava';
import { createServer, type Server } from 'node:net';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { closedPort, rblk, tempDir } from './helpers/cli.js';
import { startTargetProcess, stopAllTargets, type TargetProcess } from './helpers/target-process.js';

const NOBODY = 65534;
const asNobody = process.getuid?.() === 0 ? { uid: NOBODY, gid: NOBODY } : {};

let started: Promise<TargetProcess> | undefined;
const target = (): Promise<TargetProcess> => (started ??= startTargetProcess(null, { provider: 'tcp', volumes: [{ name: 'vol0', lun: 0, size: 1 << 20 }] }));
test.after.always(stopAllTargets);

function oneLine(t: { is(a: unknown, b: unknown, m?: string): void }, stderr: string): void {
  t.is(stderr.trimEnd().split('\n').length, 1, `one line: ${stderr}`);
}

test('a mistyped verb gets the nearest one: exit 2', async (t) => {
  const r = await rblk(['bnech', 'rblk://127.0.0.1/vol0']);
  t.is(r.code, 2);
  t.is(r.stderr, "rblk: unknown command 'bnech': did you mean 'bench'? (see --help)\n");
});

test('a word that is no verb lists the verbs', async (t) => {
  const r = await rblk(['frobnicate']);
  t.is(r.code, 2);
  t.regex(r.stderr, /^rblk: unknown command 'frobnicate': the commands are discover, info, read, write, bench, verify, attach, mount, umount, list \(see --help\)\n$/);
});

test('a mistyped option gets the nearest one of that command', async (t) => {
  const r = await rblk(['read', 'rblk://127.0.0.1/vol0', '--offest', '4k', '--zzzzzz']);
  t.is(r.code, 2);
  t.is(r.stderr, 'rblk: unknown option --offest: did you mean --offset?; unknown option --zzzzzz (see --help)\n');
});

test('a value outside an option\'s choices gets the nearest choice, per option', async (t) => {
  const r = await rblk(['bench', 'rblk://127.0.0.1/vol0', '--rw', 'rea', '--pattern', 'rnd']);
  t.is(r.code, 2);
  t.is(r.stderr, 'rblk: --rw rea is not one of read, write, mixed: did you mean read?; --pattern rnd is not one of rand, seq: did you mean rand? (see --help)\n');
  const far = await rblk(['info', 'rblk://127.0.0.1/vol0', '--fast-path', 'maybe']);
  t.is(far.code, 2);
  t.is(far.stderr, 'rblk: --fast-path maybe is not one of on, off (see --help)\n');
});

test('a host that does not resolve says so, with the resolver code', async (t) => {
  // .invalid never resolves (RFC 6761 6.4).
  const r = await rblk(['info', 'rblk://no-such-host.invalid/vol0?provider=tcp']);
  t.is(r.code, 1);
  t.regex(r.stderr, /^rblk: cannot resolve host 'no-such-host\.invalid' \(for no-such-host\.invalid:7471\): .* \((ENOTFOUND|EAI_AGAIN|EAI_NONAME)\) \[LOGIN_FAILED\]\n$/);
  t.notRegex(r.stderr, /libfabric|FI_ENODATA/);
});

test('a refused connection names HOST:PORT and keeps the fabric code', async (t) => {
  const port = await closedPort();
  const r = await rblk(['info', `rblk://localhost:${port}/vol0?provider=tcp`]);
  t.is(r.code, 1);
  t.regex(r.stderr, new RegExp(`^rblk: connection refused at localhost:${port} \\((127\\.0\\.0\\.1|::1)\\): nothing listens on port ${port} there, or not with this provider .*\\(FI_ECONNREFUSED\\) \\[LOGIN_FAILED\\]\\n$`));
});

/** A TCP server on 127.0.0.1 that is not an rblk target: each connection gets `answer` once the client has spoken, then is closed. */
async function notATarget(t: { teardown(f: () => Promise<void>): void }, answer: string): Promise<number> {
  const s: Server = createServer((c) => {
    c.on('error', () => undefined);
    c.once('data', () => c.end(answer));
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => s.close(() => r())));
  return (s.address() as { port: number }).port;
}

test('a port where another service answers says it is not an rblk target, not that the host is unreachable', async (t) => {
  // What an HTTP server, or a proxy that answers for every address, sends back to libfabric's connection header.
  const port = await notATarget(t, 'HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
  const r = await rblk(['info', `rblk://127.0.0.1:${port}/vol0?provider=tcp`, '--connect-timeout', '5s']);
  t.is(r.code, 1);
  t.regex(r.stderr, new RegExp(`^rblk: 127\\.0\\.0\\.1:${port} answered, but not as an rblk target: .*\\(FI_ENOPROTOOPT\\) \\[LOGIN_FAILED\\]\\n$`));
  t.notRegex(r.stderr, /unreachable|Protocol not available/);
});

test('a port that accepts and closes without answering says so', async (t) => {
  const port = await notATarget(t, '');
  const r = await rblk(['info', `rblk://127.0.0.1:${port}/vol0?provider=tcp`, '--connect-timeout', '5s']);
  t.is(r.code, 1);
  t.regex(r.stderr, new RegExp(`^rblk: 127\\.0\\.0\\.1:${port} accepted the connection and closed it before answering .*\\(FI_EINPROGRESS\\) \\[LOGIN_FAILED\\]\\n$`));
  t.notRegex(r.stderr, /Operation now in progress/);
});

test('attach --nbd-port on a port in use names the program listening there', async (t) => {
  const tp = await target();
  const holder: Server = createServer();
  await new Promise<void>((r) => holder.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => holder.close(() => r())));
  const port = (holder.address() as { port: number }).port;
  const r = await rblk(['attach', tp.url('vol0'), '--nbd-port', String(port)]);
  t.is(r.code, 1);
  t.regex(r.stderr, new RegExp(`^rblk: cannot serve NBD on 127\\.0\\.0\\.1:${port}: the port is in use by \\S+ \\(pid ${process.pid}\\) \\(EADDRINUSE\\); pick another --nbd-port`));
  oneLine(t, r.stderr);
});

test('mount as a user other than root says it needs root, before connecting', async (t) => {
  const port = await closedPort();
  const r = await rblk(['mount', `rblk://127.0.0.1:${port}/vol0?provider=tcp`, '/tmp/rblk-never-mounted'], process.getuid?.() === 0 ? asNobody : {});
  t.is(r.code, 1);
  t.is(r.stderr, 'rblk: rblk mount needs root (it sets up a loop device and mounts a filesystem): run it with sudo\n');
});

(process.getuid?.() === 0 ? test : test.skip)('attach as another user: the root-owned state directory is named with what to do', async (t) => {
  const tp = await target();
  const r = await rblk(['attach', tp.url('vol0')], asNobody);
  t.is(r.code, 1);
  t.regex(r.stderr, /^rblk: permission denied on \/run\/rblk\S* \((EACCES|EPERM)\): \/run\/rblk belongs to root: run this as root, or pass --state-dir DIR/);
  oneLine(t, r.stderr);
});

test('a wrong target name says which name was asked and where the right one is found', async (t) => {
  const tp = await target();
  const r = await rblk(['info', `${tp.url('vol0')}&target=iqn.2026-11.io.example:nope`]);
  t.is(r.code, 1);
  oneLine(t, r.stderr);
  // The target tells nothing of itself before login: the initiator says what it asked, and where to look.
  t.regex(
    r.stderr,
    /^rblk: cannot log in to iqn\.2026-11\.io\.example:nope at 127\.0\.0\.1:\d+: login rejected by the target: it has no target named 'iqn\.2026-11\.io\.example:nope' \(UNABLE_TO_ASSOCIATE\); a target does not tell its name before login: `rblkd ctl status` on its host shows it \(target_name in rblkd's config; leave target= out for the default, iqn\.2026-11\.io\.rblk:target\) \[LOGIN_FAILED\]\n$/,
  );
});

test('a command without its URL says what is missing, not yargs\' count', async (t) => {
  const r = await rblk(['read']);
  t.is(r.code, 2);
  t.is(r.stderr, "rblk: rblk read needs the volume's URL, rblk://host[:port]/VOLUME (see --help)\n");
  const mount = await rblk(['mount', 'rblk://127.0.0.1/vol0']);
  t.is(mount.code, 2);
  t.is(mount.stderr, 'rblk: rblk mount needs the mount point DIR (see --help)\n');
});

test('attach --nbd-socket in a directory that does not exist is refused, and nothing is created', async (t) => {
  const tp = await target();
  const dir = await tempDir(t, 'nbd-socket');
  const missing = join(dir, 'no', 'such');
  const r = await rblk(['attach', tp.url('vol0'), '--nbd-socket', join(missing, 'x.sock')], { timeoutMs: 20_000 });
  t.is(r.code, 2, r.stderr);
  t.is(r.stderr, `rblk: --nbd-socket ${join(missing, 'x.sock')}: the directory ${missing} does not exist: create it first, or put the socket in an existing directory\n`);
  t.false(existsSync(join(dir, 'no')), 'no directory was created');
});

// On a host with an RDMA device verbs works, and there is nothing to explain.
const hasRdma = existsSync('/sys/class/infiniband') && readdirSync('/sys/class/infiniband').length > 0;
(hasRdma ? test.skip : test)('--provider verbs without an RDMA device suggests tcp', async (t) => {
  const port = await closedPort();
  const r = await rblk(['info', `rblk://127.0.0.1:${port}/vol0`, '--provider', 'verbs']);
  t.is(r.code, 1);
  oneLine(t, r.stderr);
  t.regex(r.stderr, /^rblk: the verbs provider finds no RDMA device on this host .*use --provider tcp .*\(FI_ENODATA\) \[LOGIN_FAILED\]\n$/);
});
