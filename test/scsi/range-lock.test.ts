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

test('hold runs its function holding the range and releases it when the function resolves', async (t) => {
  const lock = new RangeLock();
  let heldInside = -1;
  const value = await lock.hold(0, 8, true, async () => {
    await tick();
    heldInside = lock.activeCount;
    return 'done';
  });
  t.is(value, 'done');
  t.is(heldInside, 1);
  t.is(lock.activeCount, 0);
});

test('hold releases the range when its function throws, and a waiter behind it is granted', async (t) => {
  const lock = new RangeLock();
  const failing = lock.hold(0, 8, true, async () => {
    await tick();
    throw new Error('backend failed');
  });
  const waiter = lock.acquire(4, 12, true);
  await tick();
  t.is(lock.waitingCount, 1, 'the overlapping exclusive waits while the failing holder runs');
  await t.throwsAsync(failing, { message: 'backend failed' });
  const release = await waiter;
  t.is(lock.activeCount, 1);
  t.is(lock.waitingCount, 0);
  release();
  t.is(lock.activeCount, 0);
});

test('hold waits for a conflicting holder before running its function', async (t) => {
  const lock = new RangeLock();
  const first = await lock.acquire(0, 8, false);
  let ran = false;
  const held = lock.hold(0, 8, true, () => {
    ran = true;
    return Promise.resolve(lock.activeCount);
  });
  await tick();
  t.false(ran, 'an exclusive hold does not run while a shared holder overlaps');
  first();
  t.is(await held, 1);
  t.true(ran);
  t.is(lock.activeCount, 0);
});
