// The control socket against hostile input (docs/operations.md "The control socket"): every
// request line, whatever its bytes, gets exactly one answer line, an error unless it is a
// valid request, and rblkd stays up and answers a good request afterwards. Seeded like the
// capsule fuzzing (test/protocol/fuzz.test.ts): the same inputs on every run.
import test from 'ava';
import { connect } from 'node:net';
import { join } from 'node:path';
import { controlRequest } from '../../target/daemon/control-client.js';
import { mutate, prng } from '../protocol/fuzz-corpus.js';
import { baseConfig, spawnDaemon, workdir } from './helpers/daemon-process.js';

/** Guards against a hang; never an assertion about speed. */
const GUARD_MS = 20_000;

interface Answer {
  ok: boolean;
  error?: string;
  result?: unknown;
}

/** Connects, writes `bytes` in pieces, half-closes, and returns every line rblkd sent before it closed. */
function exchange(socket: string, bytes: Buffer, pieces = 1): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const s = connect(socket);
    const got: Buffer[] = [];
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`no close from rblkd within ${GUARD_MS} ms; it sent ${Buffer.concat(got).toString('utf8').slice(0, 500)}`));
    }, GUARD_MS);
    s.on('data', (d: Buffer) => got.push(d));
    s.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    s.on('close', () => {
      clearTimeout(timer);
      const text = Buffer.concat(got).toString('utf8');
      if (text !== '' && !text.endsWith('\n')) reject(new Error(`an answer without its newline: ${text.slice(-200)}`));
      else resolve(text === '' ? [] : text.slice(0, -1).split('\n'));
    });
    s.on('connect', () => {
      const step = Math.max(1, Math.ceil(bytes.length / pieces));
      for (let at = 0; at < bytes.length; at += step) s.write(bytes.subarray(at, at + step));
      s.end();
    });
  });
}

function parseAnswer(line: string): Answer | string {
  try {
    const a = JSON.parse(line) as Answer;
    if (a === null || typeof a !== 'object' || typeof a.ok !== 'boolean') return `not an answer: ${line.slice(0, 200)}`;
    if (!a.ok && (typeof a.error !== 'string' || a.error === '')) return `an error answer without its error: ${line.slice(0, 200)}`;
    return a;
  } catch {
    return `not JSON: ${line.slice(0, 200)}`;
  }
}

/** A random JSON value, up to `depth` deep, that is never a valid request. */
function randomJson(rand: () => number, depth: number): unknown {
  const int = (n: number): number => Math.floor(rand() * n);
  const leaves: Array<() => unknown> = [
    () => null,
    () => true,
    () => false,
    () => int(2 ** 31) - 2 ** 30,
    () => rand() * 1e300,
    () => String.fromCharCode(...Array.from({ length: int(12) }, () => int(0x3000))),
    () => ['status', 'kick', 'reload', '__proto__', 'constructor', ''][int(6)],
  ];
  if (depth <= 0 || rand() < 0.3) return leaves[int(leaves.length)]!();
  if (rand() < 0.5) return Array.from({ length: int(4) }, () => randomJson(rand, depth - 1));
  const o: Record<string, unknown> = {};
  for (let i = int(4); i > 0; i--) o[['command', 'args', 'x', '__proto__'][int(4)]!] = randomJson(rand, depth - 1);
  // `command` is never a known one with args of strings only: no kick or reload is run by accident.
  if (typeof o.command === 'string') o.command = `${o.command}?`;
  return o;
}

test('control socket: hostile lines each get one error answer; rblkd stays up and answers a good request after', async (t) => {
  t.timeout(120_000);
  const w = workdir(t);
  const socket = join(w.dir, 'rblkd.ctl');
  w.writeConfig(baseConfig(w, [{ name: 'a', memory: true, size: '1MiB' }], { control: { socket } }));
  const d = spawnDaemon(t, ['--config', w.configPath]);
  await d.waitForLine(/rblkd ready/);

  const hostile: Array<[string, Buffer]> = [
    ['null', Buffer.from('null\n')],
    ['a number', Buffer.from('42\n')],
    ['a negative float', Buffer.from('-1.5e-7\n')],
    ['a huge number', Buffer.from('1e400\n')],
    ['a string', Buffer.from('"status"\n')],
    ['true', Buffer.from('true\n')],
    ['false', Buffer.from('false\n')],
    ['an empty array', Buffer.from('[]\n')],
    ['an array of a request', Buffer.from('[{"command":"status"}]\n')],
    ['an empty object', Buffer.from('{}\n')],
    ['command null', Buffer.from('{"command":null}\n')],
    ['command a number', Buffer.from('{"command":1}\n')],
    ['command __proto__', Buffer.from('{"command":"__proto__"}\n')],
    ['command toString', Buffer.from('{"command":"toString"}\n')],
    ['args an object', Buffer.from('{"command":"status","args":{}}\n')],
    ['args of numbers', Buffer.from('{"command":"kick","args":[1]}\n')],
    ['kick without its id', Buffer.from('{"command":"kick"}\n')],
    ['kick of no session', Buffer.from('{"command":"kick","args":["no-such-session"]}\n')],
    ['a blank line', Buffer.from('\n')],
    ['a line of spaces', Buffer.from('   \t \r\n')],
    ['CR LF alone', Buffer.from('\r\n')],
    ['not JSON', Buffer.from('status\n')],
    ['truncated JSON', Buffer.from('{"command":"sta\n')],
    ['invalid UTF-8', Buffer.from([0xff, 0xfe, 0xfd, 0x0a])],
    ['invalid UTF-8 inside a string', Buffer.concat([Buffer.from('{"command":"sta'), Buffer.from([0xc3, 0x28]), Buffer.from('tus"}\n')])],
    ['a NUL', Buffer.from('{"command":"status"}\u0000\n')],
    ['30k nested arrays (within the length limit)', Buffer.from(`${'['.repeat(30_000)}${']'.repeat(30_000)}\n`)],
    ['30k nested arrays as the command', Buffer.from(`{"command":${'['.repeat(30_000)}${']'.repeat(30_000)}}\n`)],
    ['100k unclosed [', Buffer.from(`${'['.repeat(100_000)}\n`)],
    ['100k unclosed [ without a newline', Buffer.from('['.repeat(100_000))],
    ['an over-long line', Buffer.from(`${'x'.repeat(1 << 20)}\n`)],
    ['an over-long valid request', Buffer.from(`{"command":"kick","args":["${'9'.repeat(200_000)}"]}\n`)],
    ['a request without its newline', Buffer.from('{"command":"nope"}')],
  ];
  for (const [what, bytes] of hostile) {
    for (const pieces of [1, 7]) {
      const lines = await exchange(socket, bytes, pieces);
      t.is(lines.length, 1, `${what} (${pieces} pieces): ${lines.length} answers: ${lines.join(' | ').slice(0, 300)}`);
      const a = parseAnswer(lines[0] ?? '');
      if (typeof a === 'string') t.fail(`${what}: ${a}`);
      else t.false(a.ok, `${what}: ${lines[0]}`);
      t.is(d.child.exitCode, null, `rblkd exited after ${what}: ${d.lines.slice(-5).join('\n')}`);
    }
  }

  // A request after an over-long line on the same connection is still answered, in order.
  const after = await exchange(socket, Buffer.from(`${'y'.repeat(100_000)}\n{"command":"status"}\n`), 5);
  t.is(after.length, 2, after.join(' | ').slice(0, 300));
  t.false((parseAnswer(after[0] ?? '') as Answer).ok);
  t.true((parseAnswer(after[1] ?? '') as Answer).ok, after[1]);

  // Seeded: mutated good requests and random JSON values, several lines to a connection.
  const rand = prng(0xc0de25);
  const good = [Buffer.from('{"command":"status"}'), Buffer.from('{"command":"volumes","args":[]}'), Buffer.from('{"command":"sessions"}')];
  const int = (n: number): number => Math.floor(rand() * n);
  let sent = 0;
  let refused = 0;
  for (let c = 0; c < 200; c++) {
    const lines: Buffer[] = [];
    for (let i = 1 + int(10); i > 0; i--) {
      const line = rand() < 0.5 ? mutate(rand, good[int(good.length)]!) : Buffer.from(JSON.stringify(randomJson(rand, 6)) ?? 'undefined');
      // One request per line: a newline the mutation made would be a second one.
      lines.push(Buffer.from(line.map((b) => (b === 0x0a ? 0x20 : b))), Buffer.from('\n'));
    }
    const count = lines.length / 2;
    const answers = await exchange(socket, Buffer.concat(lines), 1 + int(4));
    sent += count;
    if (answers.length !== count) {
      t.fail(`connection ${c}: ${count} requests, ${answers.length} answers`);
      continue;
    }
    for (const line of answers) {
      const a = parseAnswer(line);
      if (typeof a === 'string') t.fail(`connection ${c}: ${a}`);
      else if (!a.ok) refused++;
    }
  }
  t.log(`${sent} seeded requests, ${refused} refused`);
  t.true(refused > sent / 2, 'most fuzzed requests are refused');

  t.is(d.child.exitCode, null, d.lines.slice(-5).join('\n'));
  const status = (await controlRequest(socket, 'status')) as { pid: number };
  t.is(status.pid, d.child.pid!);
  t.false(
    d.lines.some((l) => /internal error|uncaught|unhandled/i.test(l)),
    d.lines.filter((l) => /internal error|uncaught|unhandled/i.test(l)).join('\n'),
  );
});
