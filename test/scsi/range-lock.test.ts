import test from 'ava';
import { RangeLock } from '../../target/scsi/range-lock.js';

const tick = () => new Promise<void>((r) => setImmediate(r));

test('shared holders overlap freely', async (t) => {
  const lock = new RangeLock();
  const a = await lock.acquire(0, 10, false);
  const b = await lock.acquire(5, 15, false);
  t.is(lock.activeCount, 2);
  a();
  b();
  t.is(lock.activeCount, 0);
});

test('an exclusive holder waits for overlapping holders and blocks later ones, in order', async (t) => {
  const lock = new RangeLock();
  const order: string[] = [];
  const shared = await lock.acquire(0, 10, false);
  const ex = lock.acquire(8, 12, true).then((r) => (order.push('exclusive'), r));
  const later = lock.acquire(11, 20, false).then((r) => (order.push('later shared'), r));
  const elsewhere = await lock.acquire(50, 60, false);
  await tick();
  t.deepEqual(order, [], 'both wait: the exclusive for the holder, the later one behind the exclusive');
  t.is(lock.waitingCount, 2);
  shared();
  const releaseEx = await ex;
  await tick();
  t.deepEqual(order, ['exclusive']);
  releaseEx();
  (await later)();
  t.deepEqual(order, ['exclusive', 'later shared']);
  elsewhere();
  t.is(lock.activeCount, 0);
  t.is(lock.waitingCount, 0);
});

test('releasing twice is harmless', async (t) => {
  const lock = new RangeLock();
  const r = await lock.acquire(0, 1, true);
  r();
  r();
  const again = await lock.acquire(0, 1, true);
  t.is(lock.activeCount, 1);
  again();
});
