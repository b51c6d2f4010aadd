import test from 'ava';
import { CommandAborted, RangeLock } from '../../target/scsi/range-lock.js';

const tick = () => new Promise<void>((r) => setImmediate(r));

test('shared holders overlap freely', async (t) => {
  const lock = new RangeLock();
  const a = await lock.acquire(undefined, 0, 10, false);
  const b = await lock.acquire(undefined, 5, 15, false);
  t.is(lock.activeCount, 2);
  a();
  b();
  t.is(lock.activeCount, 0);
});

test('an exclusive holder waits for overlapping holders and blocks later ones, in order', async (t) => {
  const lock = new RangeLock();
  const order: string[] = [];
  const shared = await lock.acquire(undefined, 0, 10, false);
  const ex = lock.acquire(undefined, 8, 12, true).then((r) => (order.push('exclusive'), r));
  const later = lock.acquire(undefined, 11, 20, false).then((r) => (order.push('later shared'), r));
  const elsewhere = await lock.acquire(undefined, 50, 60, false);
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
  const r = await lock.acquire(undefined, 0, 1, true);
  r();
  r();
  const again = await lock.acquire(undefined, 0, 1, true);
  t.is(lock.activeCount, 1);
  again();
});

test('hold runs its function holding the range and releases it when the function resolves', async (t) => {
  const lock = new RangeLock();
  let heldInside = -1;
  const value = await lock.hold(undefined, 0, 8, true, async () => {
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
  const failing = lock.hold(undefined, 0, 8, true, async () => {
    await tick();
    throw new Error('backend failed');
  });
  const waiter = lock.acquire(undefined, 4, 12, true);
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
  const first = await lock.acquire(undefined, 0, 8, false);
  let ran = false;
  const held = lock.hold(undefined, 0, 8, true, () => {
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

test("fence: a lost owner's held range turns exclusive, so later commands on those blocks wait for it", async (t) => {
  const lock = new RangeLock();
  const lost = {};
  const live = {};
  const order: string[] = [];
  const stuck = await lock.acquire(lost, 0, 8, false);
  t.is(lock.fence(lost), 1);
  const reissued = lock.acquire(live, 4, 6, false).then((r) => (order.push('reissued'), r));
  const elsewhere = await lock.acquire(live, 8, 16, false);
  await tick();
  t.deepEqual(order, [], 'the reissued copy waits for the first one');
  stuck();
  (await reissued)();
  t.deepEqual(order, ['reissued']);
  elsewhere();
  t.is(lock.activeCount, 0);
});

test('fence: a lost owner is granted nothing more, and its waiting ranges leave the queue', async (t) => {
  const lock = new RangeLock();
  const lost = {};
  const other = {};
  const exclusive = await lock.acquire(other, 0, 8, true);
  const waiting = lock.acquire(lost, 0, 8, false);
  const behind = lock.acquire(other, 0, 8, false);
  t.is(lock.waitingCount, 2);
  t.is(lock.fence(lost), 0);
  await t.throwsAsync(waiting, { instanceOf: CommandAborted });
  await t.throwsAsync(lock.acquire(lost, 100, 101, false), { instanceOf: CommandAborted });
  t.is(lock.waitingCount, 1);
  exclusive();
  (await behind)();
  t.is(lock.activeCount, 0);
  t.is(lock.waitingCount, 0);
});

test('fence: an unfenced owner and ownerless ranges are untouched', async (t) => {
  const lock = new RangeLock();
  const a = await lock.acquire({}, 0, 8, false);
  const b = await lock.acquire(undefined, 0, 8, false);
  t.is(lock.fence({}), 0);
  (await lock.acquire(undefined, 0, 8, false))();
  a();
  b();
  t.is(lock.activeCount, 0);
});
