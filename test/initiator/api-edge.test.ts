// The library's API edge over a real tcp fabric: Uint8Array wherever a Buffer
// is taken, AbortSignal on I/O (nothing is sent when aborted first; an
// in-flight write still lands; an aborted read never fills the caller's
// buffer), and `await using` for Session and Volume.
import test from 'ava';
import { AbortError, connect, type Session } from '../../initiator/index.js';
import { checkSuiteResources, warmUpFabric } from '../helpers/resources.js';
import { gated, pattern, startServer, type TestTarget } from './helpers/target.js';

checkSuiteResources(test, { warmUp: () => warmUpFabric() });

const MiB = 1 << 20;

async function setup(t: { teardown(fn: () => Promise<void>): void }): Promise<{ target: TestTarget; s: Session }> {
  const target = await startServer('tcp', [{ name: 'vol0', lun: 0, size: 4 * MiB }]);
  const s = await connect(target.options());
  t.teardown(async () => {
    await s.close();
    await target.close();
  });
  return { target, s };
}

test('Uint8Array in, Uint8Array out: writes and reads the same bytes, views included', async (t) => {
  const { s } = await setup(t);
  const vol = await s.open('vol0');
  // A view at an odd byte offset into a larger ArrayBuffer, larger than immediate data (8 KiB).
  const backing = new Uint8Array(64 * 1024 + 3);
  backing.set(pattern(64 * 1024, 5), 3);
  const data = backing.subarray(3);
  await vol.write(4096, data, { fua: true });
  const into = new Uint8Array(64 * 1024);
  const back = await vol.read(4096, into);
  t.true(Buffer.from(into).equals(Buffer.from(data)));
  t.is(back.buffer, into.buffer, 'the Buffer resolved is a view of the caller\'s memory');
  // Small (in-capsule) write and compareAndWrite from plain Uint8Arrays.
  const small = new Uint8Array(512).fill(7);
  await vol.write(0, small);
  await vol.compareAndWrite(0, small, new Uint8Array(512).fill(9));
  t.true((await vol.read(0, 512)).equals(Buffer.alloc(512, 9)));
  const into2 = new Uint8Array(512);
  await vol.readInto(0, into2);
  t.is(into2[511], 9);
});

test('what is not a buffer is a TypeError naming the call and what it got; other views are taken as their bytes', async (t) => {
  const { s } = await setup(t);
  const vol = await s.open('vol0');
  // A JavaScript caller can pass anything: the error says what was wrong, not what Buffer.from disliked.
  const bad = (v: unknown): Uint8Array => v as Uint8Array;
  await t.throwsAsync(vol.write(0, bad('hello')), { instanceOf: TypeError, code: 'ERR_INVALID_ARG_TYPE', message: 'write: data must be a Buffer, a Uint8Array or a RegisteredBuffer; got string' });
  await t.throwsAsync(vol.write(0, bad(undefined)), { instanceOf: TypeError, message: /^write: data must be .*; got undefined$/ });
  await t.throwsAsync(vol.read(0, bad('4096')), { instanceOf: TypeError, message: 'read: the second argument must be a length, or a Buffer, Uint8Array or RegisteredBuffer to fill; got string' });
  await t.throwsAsync(vol.compareAndWrite(0, bad([1, 2]), new Uint8Array(512)), { instanceOf: TypeError, message: 'compareAndWrite: expected must be a Buffer or a Uint8Array; got Array' });
  // A DataView or another typed array is its bytes, as for Node's fs.write.
  const words = new Uint32Array(128).fill(0x01020304);
  await vol.write(1024, bad(new DataView(words.buffer)));
  t.true((await vol.read(1024, 512)).equals(Buffer.from(words.buffer)));
});

test('an already aborted signal rejects with ABORT_ERR and sends nothing', async (t) => {
  const { target, s } = await setup(t);
  const vol = await s.open('vol0');
  const backend = gated(target, 'vol0');
  const before = backend.calls.length;
  const ac = new AbortController();
  ac.abort(new Error('user gave up'));
  const e = await t.throwsAsync(vol.write(0, Buffer.alloc(4096, 1), { signal: ac.signal }), { instanceOf: AbortError });
  t.is(e?.code, 'ABORT_ERR');
  t.is(e?.name, 'AbortError');
  t.is((e?.cause as Error).message, 'user gave up');
  await t.throwsAsync(vol.read(0, 4096, { signal: ac.signal }), { code: 'ABORT_ERR' } as never);
  await t.throwsAsync(vol.flush({ signal: ac.signal }), { code: 'ABORT_ERR' } as never);
  t.is(backend.calls.length, before, 'the target saw no command');
});

test('aborted in flight: the promise rejects at once; the write still lands; the read never fills the buffer', async (t) => {
  const { target, s } = await setup(t);
  const vol = await s.open('vol0');
  const backend = gated(target, 'vol0');
  const data = pattern(16 * 1024, 8);

  const writes = backend.hold('write');
  const ac = new AbortController();
  const w = vol.write(MiB, data, { signal: ac.signal });
  await writes.reached;
  ac.abort();
  await t.throwsAsync(w, { code: 'ABORT_ERR', message: `write [${MiB}, +${data.length}) on volume vol0: aborted` } as never);
  writes.release();
  // The command was already at the target: its completion is discarded, its data is there.
  t.true((await vol.read(MiB, data.length)).equals(data), 'the aborted write landed');

  const reads = backend.hold('read');
  const rc = new AbortController();
  const into = Buffer.alloc(data.length);
  const r = vol.read(MiB, into, { signal: rc.signal });
  await reads.reached;
  rc.abort();
  await t.throwsAsync(r, { code: 'ABORT_ERR' } as never);
  reads.release();
  // Once the target has answered (the next read on the queue comes after it), the buffer is still untouched.
  t.true((await vol.read(MiB, data.length)).equals(data));
  t.true(into.equals(Buffer.alloc(data.length)), 'an aborted read does not write into the caller\'s buffer');

  // A signal that never fires changes nothing.
  t.true((await vol.read(MiB, 4096, { signal: new AbortController().signal })).equals(data.subarray(0, 4096)));
});

test('await using closes the volume and logs the session out at the end of the scope', async (t) => {
  const target = await startServer('tcp', [{ name: 'vol0', lun: 0, size: 4 * MiB }]);
  t.teardown(() => target.close());
  let kept: Session | undefined;
  {
    await using s = await connect(target.options());
    await using vol = await s.open('vol0');
    kept = s;
    await vol.write(0, new Uint8Array(512).fill(3));
    t.is(s.state, 'connected');
  }
  t.is(kept.state, 'closed');
  {
    await using s = await connect(target.options());
    const vol = await s.open('vol0');
    t.true((await vol.read(0, 512)).equals(Buffer.alloc(512, 3)));
  }
});

test('lbaStatus: runs of mapped and deallocated blocks on a thin volume, clipped to the range', async (t) => {
  const { s } = await setup(t);
  const vol = await s.open('vol0');
  // 4 MiB, nothing written: one deallocated run.
  t.deepEqual(await vol.lbaStatus(0, 4 * MiB), [{ offset: 0, length: 4 * MiB, status: 'deallocated' }]);
  await vol.write(MiB, pattern(64 * 1024, 2));
  t.deepEqual(await vol.lbaStatus(0, 4 * MiB), [
    { offset: 0, length: MiB, status: 'deallocated' },
    { offset: MiB, length: 64 * 1024, status: 'mapped' },
    { offset: MiB + 64 * 1024, length: 3 * MiB - 64 * 1024, status: 'deallocated' },
  ]);
  t.deepEqual(await vol.lbaStatus(MiB + 4096, 8192), [{ offset: MiB + 4096, length: 8192, status: 'mapped' }]);
  await vol.discard(MiB, 64 * 1024);
  t.deepEqual(await vol.lbaStatus(MiB - 4096, 8192), [{ offset: MiB - 4096, length: 8192, status: 'deallocated' }]);
  await t.throwsAsync(vol.lbaStatus(0, 4 * MiB + 512), { instanceOf: RangeError });
});
